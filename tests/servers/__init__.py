"""Real servers on loopback for tests: an LLM server speaking the OpenAI chat
completions and Anthropic messages wire formats, and an SMTP server."""
