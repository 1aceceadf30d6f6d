"""Where alert events go: the terminal, Slack, and whatever plugs in beside them."""
