"""The network-namespace test bed: tester ports, a NAT44 DUT with nftables and conntrack."""
