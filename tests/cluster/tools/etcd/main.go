// Command etcd is the upstream etcd server, built from its Go module for
// Airlock's test control plane. Test tooling only; never shipped.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
