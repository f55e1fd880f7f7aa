"""Keys: where a provider's key comes from (``keys``) and how every key is kept
out of what nodecode logs, stores, shows and sends (``redact``)."""
