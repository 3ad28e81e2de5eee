"""The DUT channel (netns | ssh), its probes, counters and hooks."""
