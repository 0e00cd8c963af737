// Command sessionkeys prints a new Ed25519 key pair for session tokens, in
// the environment form the services read:
//
//	SESSION_SIGNING_KEY=<base64 seed>   (accounts only; a secret)
//	SESSION_PUBLIC_KEY=<base64 key>     (every service)
package main

import (
	"fmt"
	"os"

	"github.com/svc-dev/svc/libs/auth/session"
)

func main() { os.Exit(run()) }

func run() int {
	signing, public, err := session.GenerateKeyPair()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sessionkeys:", err)
		return 1
	}
	fmt.Printf("SESSION_SIGNING_KEY=%s\nSESSION_PUBLIC_KEY=%s\n", signing, public)
	return 0
}
