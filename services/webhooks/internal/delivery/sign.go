package delivery

import (
	"errors"
	"fmt"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Signature returns the webhook-signature header for an attempt: one
// "v1,<signature>" per secret, in the order given (newest first), space
// separated. It signs with the Standard Webhooks library itself so that
// receivers verifying with its libraries agree with us by construction.
func Signature(id string, at time.Time, body []byte, secrets []string) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("sign webhook: no secret")
	}
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			// The library's error quotes nothing of the secret, but it is
			// left out anyway: secrets never reach logs.
			return "", errors.New("sign webhook: secret is not whsec_ and base64")
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return "", fmt.Errorf("sign webhook: %w", err)
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}
