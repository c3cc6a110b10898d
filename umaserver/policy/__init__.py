"""Owners' policies: the rule model, the rule file, deciding a request, the reloading store."""
