"""Alert notification: lifecycle (grouping, inhibition, silences, repeats) and durable Slack delivery."""
