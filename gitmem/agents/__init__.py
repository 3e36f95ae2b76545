"""Agents: workers and tasks, the memory tool, dreams and dreamers, the prompt section."""
