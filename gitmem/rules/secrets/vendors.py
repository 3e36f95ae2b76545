"""Token formats that vendors issue, each recognisable by its own prefix and shape.

The patterns are written from the vendors' published formats. A token whose body is a placeholder
(``ghp_xxxxxxxx…``, one repeated character, ``1234567890abcdef…``) is not a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gitmem.rules.secrets.engine import Rule, regex_rule

_B = r"(?<![A-Za-z0-9_])"  # a token starts at a boundary
_E = r"(?![A-Za-z0-9_])"  # ... and ends at one


_VENDOR_PREFIX = re.compile(r"^[A-Za-z]{1,12}[_-](?:v1_|live_|test_|api\d\d-|proj-)?")
_SIX_SAME = re.compile(r"(.)\1{5}")


def placeholder_body(token: str) -> bool:
    """``ghp_xxxx…``, ``sk_live_0000…``: documentation, not a credential.

    A body of letters in order (``AKIAABCDEFGHIJKLMNOP``) still counts: it has a real token's shape,
    and tests and docs that use it expect a refusal.
    """
    body = _VENDOR_PREFIX.sub("", token)
    return "xxxx" in body.lower() or len(set(body)) <= 4 or _SIX_SAME.search(body) is not None


def _real(match: re.Match[str]) -> bool:
    return not placeholder_body(match.group(0))


def _vendor(
    rule_id: str,
    name: str,
    triggers: str,
    pattern: str,
    *,
    back: int = 0,
    ahead: int = 300,
    accept: Callable[[re.Match[str]], bool] = _real,
    kind: str = "an access token",
) -> Rule:
    return regex_rule(rule_id, f"{kind} ({name})", triggers.split(), pattern, back=back, ahead=ahead, accept=accept)


def _mixed(match: re.Match[str]) -> bool:
    """A body that mixes letters and digits, as generated tokens do (and words do not)."""
    token = match.group(0)
    return _real(match) and any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


VENDOR_RULES: tuple[Rule, ...] = (
    _vendor(
        "aws-access-key-id",
        "AWS access key id",
        "akia asia abia acca",
        _B + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}" + _E,
    ),
    _vendor(
        "aws-secret-access-key",
        "AWS secret access key",
        "aws_secret secretaccesskey aws-secret",
        r"(?i)(?:aws_?secret(?:_access)?_?key|secretaccesskey|aws-secret-access-key)[\"']?"
        r"(?:\s*[:=>]+\s*|[ \t]+)[\"']?"
        r"(?-i:[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        back=40,
    ),
    _vendor("github-token", "GitHub token", "ghp_ gho_ ghu_ ghs_ ghr_", _B + r"gh[pousr]_[A-Za-z0-9]{36,251}" + _E),
    _vendor("github-fine-grained-token", "GitHub token", "github_pat_", _B + r"github_pat_[A-Za-z0-9_]{50,251}" + _E),
    _vendor(
        "gitlab-token",
        "GitLab token",
        "glpat- gldt- glrt- glrtr- glptt- glcbt- glimt- gloas- glsoat- glffct- glagent- glft- glwt- gr1348941",
        _B + r"(?:gl(?:pat|dt|rtr?|ptt|cbt|imt|oas|soat|ffct|agent|ft|wt)-|GR1348941)[A-Za-z0-9_\-.]{20,200}",
    ),
    _vendor(
        "slack-token",
        "Slack token",
        "xoxb- xoxp- xoxa- xoxo- xoxs- xoxr- xoxe",
        _B + r"xox(?:[abposr]|e(?:\.xox[bp])?)-(?:\d+-)?[A-Za-z0-9-]{10,250}",
        accept=_mixed,
    ),
    _vendor("slack-app-token", "Slack token", "xapp-", _B + r"xapp-\d-[A-Z0-9]{6,20}-\d{6,20}-[a-f0-9]{32,80}"),
    _vendor(
        "slack-webhook",
        "Slack webhook URL",
        "hooks.slack.com",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_]{6,20}/[A-Za-z0-9_]{6,20}/"
        r"[A-Za-z0-9_/]{16,120}",
        kind="a webhook secret",
    ),
    _vendor(
        "stripe-key",
        "Stripe secret key",
        "sk_live_ sk_test_ rk_live_ rk_test_",
        _B + r"[sr]k_(?:live|test)_[0-9A-Za-z]{10,247}" + _E,
    ),
    _vendor("stripe-webhook-secret", "Stripe webhook secret", "whsec_", _B + r"whsec_[A-Za-z0-9+/=]{24,80}"),
    _vendor("sendgrid-key", "SendGrid API key", "sg.", _B + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}" + _E),
    _vendor("npm-token", "npm token", "npm_", _B + r"npm_[A-Za-z0-9]{36}" + _E),
    _vendor("pypi-token", "PyPI token", "pypi-", _B + r"pypi-AgE[A-Za-z0-9_-]{50,300}"),
    _vendor(
        "huggingface-token",
        "Hugging Face token",
        "hf_ api_org_",
        _B + r"(?:hf_|api_org_)[A-Za-z0-9]{30,40}" + _E,
        accept=lambda m: _real(m) and _has_upper_lower(m),
    ),
    _vendor(
        "digitalocean-token", "DigitalOcean token", "dop_v1_ doo_v1_ dor_v1_", _B + r"do[opr]_v1_[a-f0-9]{64}" + _E
    ),
    _vendor(
        "vault-token", "HashiCorp Vault token", "hvs. hvb. hvr.", _B + r"hv[sbr]\.[A-Za-z0-9_-]{24,300}", accept=_mixed
    ),
    _vendor(
        "shopify-token", "Shopify token", "shpat_ shpss_ shpca_ shppa_", _B + r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _E
    ),
    _vendor("anthropic-key", "Anthropic API key", "sk-ant-", _B + r"sk-ant-[A-Za-z0-9_-]{20,300}", accept=_mixed),
    _vendor(
        "openai-key",
        "OpenAI-style API key",
        "sk-",
        _B + r"sk-(?!ant-)(?:[a-z]{2,10}-){0,2}[A-Za-z0-9_-]{20,200}(?![A-Za-z0-9_-])",
        accept=lambda m: _mixed(m) and len(m.group(0)) >= 35,
    ),
    _vendor("google-api-key", "Google API key", "aiza", _B + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    _vendor("google-oauth-secret", "Google OAuth client secret", "gocspx-", _B + r"GOCSPX-[A-Za-z0-9_-]{24,40}"),
    _vendor(
        "google-oauth-token",
        "Google OAuth token",
        "ya29. 1//0",
        _B + r"(?:ya29\.[A-Za-z0-9_-]{30,300}|1//0[A-Za-z0-9_-]{40,300})",
        accept=_mixed,
    ),
    _vendor(
        "firebase-server-key",
        "Firebase Cloud Messaging key",
        "apa91b",
        r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,200}",
        back=12,
    ),
    _vendor(
        "azure-client-secret",
        "Azure client secret",
        "q~",
        r"(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~.-])",
        back=5,
        accept=_mixed,
    ),
    _vendor(
        "azure-sas-signature",
        "Azure SAS signature",
        "sig=",
        r"[?&;\s\"']sig=[A-Za-z0-9%+/]{30,120}(?:%3D|=){0,2}",
        back=1,
        accept=_mixed,
        kind="a secret",
    ),
    _vendor("twilio-key", "Twilio API key", "twilio", _B + r"(?:SK|AC)[0-9a-fA-F]{32}" + _E, back=200, ahead=300),
    _vendor("mailgun-key", "Mailgun key", "key-", _B + r"key-[0-9a-zA-Z]{32}" + _E, accept=_mixed),
    _vendor(
        "mailgun-key-v2",
        "Mailgun key",
        "mailgun",
        _B + r"[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}" + _E,
        back=200,
        ahead=300,
    ),
    _vendor("mailchimp-key", "Mailchimp API key", "-us", _B + r"[0-9a-f]{32}-us\d{1,2}" + _E, back=33, ahead=3),
    _vendor(
        "discord-bot-token",
        "Discord bot token",
        "discord bot ",
        _B + r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}" + _E,
        back=200,
        ahead=300,
    ),
    _vendor(
        "discord-webhook",
        "Discord webhook URL",
        "discord.com/api/webhooks discordapp.com/api/webhooks",
        r"(?i:discord(?:app)?\.com/api/webhooks/)\d{10,25}/[A-Za-z0-9_-]{40,100}",
        ahead=150,
        kind="a webhook secret",
    ),
    _vendor("telegram-bot-token", "Telegram bot token", ":aa", r"(?<![\d:])\d{8,10}:AA[A-Za-z0-9_-]{33}" + _E, back=11),
    _vendor(
        "jwt",
        "JSON Web Token",
        "eyj",
        # The boundary is checked after the literal: a sweep of the note then skips to each "eyJ".
        r"eyJ(?<![A-Za-z0-9_]eyJ)[A-Za-z0-9_-]{10,1000}\.eyJ[A-Za-z0-9_-]{2,4000}\.[A-Za-z0-9_-]{10,1000}",
        ahead=5000,
        kind="a token",
    ),
    _vendor("databricks-token", "Databricks token", "dapi", _B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E),
    _vendor("atlassian-token", "Atlassian API token", "atatt atctt", _B + r"AT[AC]TT[A-Za-z0-9_=\-]{60,300}"),
    _vendor(
        "square-token",
        "Square token",
        "sq0atp- sq0csp- eaaa",
        _B + r"(?:sq0atp-[A-Za-z0-9_-]{22}|sq0csp-[A-Za-z0-9_-]{43}|EAAA[A-Za-z0-9_-]{60})" + _E,
    ),
    _vendor("facebook-token", "Facebook access token", "eaac eaag", _B + r"EAA[CG][A-Za-z0-9]{80,300}" + _E),
    _vendor(
        "braintree-token",
        "Braintree access token",
        "access_token$",
        r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
    ),
    _vendor("heroku-key", "Heroku API key", "hrku-", _B + r"HRKU-[A-Za-z0-9_-]{20,100}"),
    _vendor(
        "doppler-token",
        "Doppler token",
        "dp.pt. dp.st. dp.sa. dp.ct. dp.scim. dp.audit.",
        _B + r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44}" + _E,
    ),
    _vendor("pulumi-token", "Pulumi token", "pul-", _B + r"pul-[a-f0-9]{40}" + _E),
    _vendor("linear-key", "Linear API key", "lin_api_ lin_oauth_", _B + r"lin_(?:api|oauth)_[A-Za-z0-9]{40}" + _E),
    _vendor("postman-key", "Postman API key", "pmak-", _B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _E),
    _vendor(
        "grafana-token",
        "Grafana token",
        "glc_ glsa_ eyjrijoi",
        _B + r"(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
        r"|eyJrIjoi[A-Za-z0-9+/]{50,200}={0,2})",
    ),
    _vendor(
        "new-relic-key", "New Relic key", "nrak- nrjs- nrii- nraa-", _B + r"NR(?:AK|JS|II|AA)-[A-Za-z0-9]{19,32}" + _E
    ),
    _vendor(
        "sentry-token",
        "Sentry token",
        "sntrys_ sntryu_",
        _B + r"(?:sntrys_eyJ[A-Za-z0-9+/=_-]{50,400}|sntryu_[a-f0-9]{64})",
    ),
    _vendor(
        "docker-hub-token", "Docker Hub token", "dckr_pat_ dckr_oat_", _B + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,40}"
    ),
    _vendor(
        "planetscale-token", "PlanetScale token", "pscale_", _B + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}"
    ),
    _vendor(
        "supabase-token",
        "Supabase token",
        "sbp_ sb_secret_",
        _B + r"(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,60})",
    ),
    _vendor("netlify-token", "Netlify token", "nfp_", _B + r"nfp_[A-Za-z0-9]{36}" + _E),
    _vendor("figma-token", "Figma token", "figd_", _B + r"figd_[A-Za-z0-9_-]{40}" + _E),
    _vendor("groq-key", "Groq API key", "gsk_", _B + r"gsk_[A-Za-z0-9]{48,56}" + _E),
    _vendor("xai-key", "xAI API key", "xai-", _B + r"xai-[A-Za-z0-9]{70,90}" + _E),
    _vendor("replicate-token", "Replicate token", "r8_", _B + r"r8_[A-Za-z0-9]{37}" + _E),
    _vendor("perplexity-key", "Perplexity API key", "pplx-", _B + r"pplx-[A-Za-z0-9]{48}" + _E),
    _vendor("langsmith-key", "LangSmith key", "lsv2_", _B + r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}" + _E),
    _vendor("pinecone-key", "Pinecone API key", "pcsk_", _B + r"pcsk_[A-Za-z0-9_]{40,100}" + _E),
    _vendor("tavily-key", "Tavily API key", "tvly-", _B + r"tvly-(?:dev-)?[A-Za-z0-9]{32}" + _E),
    _vendor("artifactory-key", "Artifactory key", "akcp", _B + r"AKCp[A-Za-z0-9]{60,80}" + _E),
    _vendor("sonarqube-token", "SonarQube token", "sqp_ squ_ sqa_", _B + r"sq[pua]_[a-f0-9]{40}" + _E),
    _vendor("buildkite-token", "Buildkite token", "bkua_", _B + r"bkua_[a-f0-9]{40}" + _E),
    _vendor("circleci-token", "CircleCI token", "ccipat_", _B + r"CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}" + _E),
    _vendor(
        "terraform-token",
        "Terraform Cloud token",
        "atlasv1",
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        back=16,
    ),
    _vendor("contentful-token", "Contentful token", "cfpat-", _B + r"CFPAT-[A-Za-z0-9_-]{43}" + _E),
    _vendor("shippo-token", "Shippo token", "shippo_", _B + r"shippo_(?:live|test)_[a-f0-9]{40}" + _E),
    _vendor("dynatrace-token", "Dynatrace token", "dt0c01.", _B + r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}" + _E),
    _vendor("easypost-key", "EasyPost key", "ezak", _B + r"EZ[AT]K[A-Za-z0-9]{54}" + _E),
    _vendor("rubygems-key", "RubyGems key", "rubygems_", _B + r"rubygems_[a-f0-9]{48}" + _E),
    _vendor("nuget-key", "NuGet key", "oy2", _B + r"oy2[a-z0-9]{43}" + _E, accept=_mixed),
    _vendor("openshift-token", "OpenShift token", "sha256~", r"sha256~[A-Za-z0-9_-]{43}" + _E),
    _vendor("prefect-key", "Prefect key", "pnu_", _B + r"pnu_[A-Za-z0-9]{36}" + _E),
    _vendor(
        "flyio-token",
        "Fly.io token",
        "fo1_ fm1 fm2_",
        _B + r"(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/=_-]{100,400})",
    ),
    _vendor("alibaba-key", "Alibaba Cloud key id", "ltai", _B + r"LTAI[A-Za-z0-9]{12,20}" + _E, accept=_mixed),
    _vendor("dropbox-token", "Dropbox token", "sl.", _B + r"sl\.[A-Za-z0-9_-]{130,200}"),
    _vendor(
        "twitter-bearer",
        "Twitter bearer token",
        "aaaaaaaaaaaaaaaaaaaa",
        r"AAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{30,120}",
        accept=lambda m: _has_upper_lower(m),
    ),
    _vendor(
        "teams-webhook",
        "Microsoft Teams webhook URL",
        "webhook.office.com outlook.office.com/webhook",
        r"(?:webhook\.office\.com/webhookb2|outlook\.office\.com/webhook)/[A-Za-z0-9@/_-]{40,300}",
        kind="a webhook secret",
    ),
    _vendor(
        "gitmem-secret",
        "gitmem key, user or task secret",
        "gm_key_ gm_usr_ gm_tsk_",
        _B + r"gm_(?:key|usr|tsk)_[A-Za-z0-9_-]{20,200}",
    ),
    _vendor(
        "age-secret-key",
        "age secret key",
        "age-secret-key-1",
        r"AGE-SECRET-KEY-1[0-9A-Z]{50,70}" + _E,
        kind="a private key",
    ),
)


def _has_upper_lower(match: re.Match[str]) -> bool:
    token = match.group(0)
    return any(c.isupper() for c in token) and any(c.islower() for c in token)
