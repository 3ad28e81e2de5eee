"""``tgen serve``: the console in a browser, through textual-serve, safely.

- :mod:`.access`: who may connect (loopback by default, a token otherwise).
- :mod:`.server`: the aiohttp server that spawns one ``tgen tui`` per browser session,
  one session at a time, and stops every console it started when it exits.

Nothing here is imported by the headless verbs; aiohttp and textual-serve load only
when ``tgen serve`` runs.
"""
