"""Campaigns: one test over a matrix of points (profiles/campaign.py), resumable, stored
by build, reported side by side. Above the lab (it sets the lab DUT's knobs per point)
and the methodology (a point may be a search); each point is one run owner's run."""
