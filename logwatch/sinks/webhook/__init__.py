"""The generic webhook sink (`[[webhook]]`): each alert group posted as Alertmanager's webhook
payload, durable like the Slack spool. `logwatch/webhook_config.py` reads the tables, `payload` builds the body,
`outbox` keeps and delivers it, `sink` ties them to the lifecycle."""
