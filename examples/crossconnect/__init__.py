"""A cross-connect node: a quoter that reads a market-data bus and trades on an order bus
(docs/sites.md, "Several buses and the cross-connect node")."""
