"""The N-avg leaderboard (LOTUS, Hirota et al. 2025): rank caption sets on every metric.

:mod:`.runner` evaluates each set once on every metric (GCE and LOTUS, through the
engine's accumulators), :mod:`.board` ranks them with a bootstrap of the whole ranking,
:mod:`.profiles` holds the criteria and user profiles, and :mod:`.page` / :mod:`.markdown`
write the static page and the Markdown tables.
"""
