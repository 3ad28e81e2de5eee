"""The procedures, above the kit and below the registry: each package holds a test's
``run`` (trials over the kit), its part of the report (``report``) and its output.

rfc2544   throughput (binary search), frame loss, RFC 8219 latency and PDV
rfc9693   stateful NAT: connection rate, table capacity, tear-down (phase 1 and 2, TCP)
mlr       the RFC 9971 multiple loss ratio search (``tgen search``)
sweep     throughput and connection rate against sessions (RFC 9693's trial)
scaleup   a scalable test once per core count (handed the registry's lookup)
"""
