"""Services: the protocol's decisions, as plain functions over the storage contract and a clock.

Blueprints and the command line call these; these call `storage.Storage`, never SQL.
"""
