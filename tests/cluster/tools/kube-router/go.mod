module airlock.dev/tests/cluster/tools/kube-router

go 1.22

require github.com/cloudnativelabs/kube-router/v2 v2.1.0
