"""The web front (`champollion web`): live leaderboards, run and corpus
pages, and community review campaigns, over the gateway's run store and
with its access rules (docs/web.md)."""
