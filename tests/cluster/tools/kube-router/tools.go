//go:build tools

// Package tools pins kube-router, run on the test node for one thing: its
// NetworkPolicy controller (--run-firewall only; no routing, no service
// proxy), so the deny-all policy Airlock puts in every tenant namespace is
// enforced there and the e2e tier can prove it. kube-network-policies, the
// nftables one, needs the kernel's nft_queue (CONFIG_NFT_QUEUE), which these
// machines lack; kube-router needs iptables and ipset, which they have.
// Test tooling only; never shipped.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
