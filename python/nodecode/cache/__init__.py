"""The provider's prompt cache as nodecode sees it: where a request's cache
marks go (``plan``) and the ledger of what the provider holds (``ledger``)."""
