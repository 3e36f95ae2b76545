"""Passwords given on a command line: ``mysql -pX``, ``sshpass -p X``, ``psexec -p X``, ``curl -u user:X``,
``login: user / X`` and the like. Each command's own shape is a rule; the value is judged as a password
(:func:`gitmem.rules.secrets.keywords.value_is_secret`), so ``-p $DB_PASSWORD`` and ``-u user:[PASSWORD]``
save. Counted with the keyword rules: on a line, a vendor's or a key's rule is named first.
"""

from __future__ import annotations

from gitmem.rules.secrets import values
from gitmem.rules.secrets.engine import Rule, regex_rule
from gitmem.rules.secrets.keywords import ANY_VALUE, judged

COMMAND_RULES: tuple[Rule, ...] = (
    regex_rule(
        "cli-login-password",
        "a saved password (command line)",
        ["login"],
        r"login(?<!\wlogin)\b[^\n|;&]{0,200}?[ \t](?:-p|--password)(?:[ \t]+|=)" + ANY_VALUE,
        ahead=420,
        accept=judged("password"),
    ),
    regex_rule(
        "login-pair",
        "a saved password (user / password)",
        ["login"],
        r"""login(?<!\wlogin)(?:[ \t]*[:=][ \t]*|[ \t]+)(?P<user>[\w.@\\\-]{1,64})[ \t]*/[ \t]*"""
        r"""(?P<value>[^\s/]{4,100})""",
        ahead=190,
        accept=lambda m: values.looks_like_password(m["value"], strict=True),
    ),
    regex_rule(
        "psexec-password",
        "a saved password (command line)",
        ["psexec"],
        r"\b(?i:psexec)(?:64)?(?:\.exe)?\b[^\n|;&]{0,200}?[ \t]-p[ \t]+" + ANY_VALUE,
        ahead=420,
        accept=judged("password"),
    ),
    regex_rule(
        "mysql-password",
        "a saved password (command line)",
        ["mysql", "mariadb"],
        r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]{0,200}?[ \t]-p"
        r"(?P<value>[^\s\"'|;&-][^\s\"'|;&]{2,200})",
        ahead=420,
        accept=judged("password"),
    ),
    regex_rule(
        "sshpass-password",
        "a saved password (command line)",
        ["sshpass"],
        r"\bsshpass[ \t]+-p[ \t]*" + ANY_VALUE,
        ahead=220,
        accept=judged("password"),
    ),
    regex_rule(
        "archive-password",
        "a saved password (command line)",
        ["zip ", "7z ", "7za ", "openssl "],
        r"\b(?:(?:un)?zip\b[^\n|;&]{0,200}?[ \t]-P[ \t]+|7za?\b[^\n|;&]{0,200}?[ \t]-p"
        r"|openssl\b[^\n|;&]{0,200}?[ \t](?:-k[ \t]+|-pass(?:in|out)?[ \t]+pass:))" + ANY_VALUE,
        back=6,
        ahead=420,
        accept=judged("password"),
    ),
    regex_rule(
        "redis-password",
        "a saved password (command line)",
        ["redis-cli"],
        r"\bredis-cli\b[^\n|;&]{0,200}?[ \t]-a[ \t]+" + ANY_VALUE,
        ahead=420,
        accept=judged("password"),
    ),
    regex_rule(
        "chpasswd-password",
        "a saved password (command line)",
        ["chpasswd"],
        r"""echo[ \t]+["']?[\w.-]{1,32}:(?P<value>[^\s"':]{1,100})["']?[ \t]*\|[ \t]*(?:sudo[ \t]+)?chpasswd""",
        back=160,
        ahead=10,
        accept=judged("password"),
    ),
    regex_rule(
        "htpasswd-password",
        "a saved password (command line)",
        ["htpasswd"],
        r"""\bhtpasswd[ \t]+-[a-zA-Z]*b[a-zA-Z]*(?:[ \t]+-\w+)*[ \t]+\S{1,200}[ \t]+\S{1,64}[ \t]+""" + ANY_VALUE,
        ahead=500,
        accept=judged("password"),
    ),
    regex_rule(
        "cli-user-password",
        "a saved password (command line)",
        ["-u", "--user", "--proxy-user"],
        r"""(?<![\w-])(?:-u|-U|--user|--proxy-user)(?:[ \t]+|=|(?=["']))["']?[^\s:"'$]{0,100}:["']?"""
        r"""(?P<value>[^\s"'@]{1,200})""",
        ahead=320,
        accept=judged("password"),
    ),
)
