package attribution

// Waiting is how many of c's calls wait for a batch.
func Waiting(c *Client) int { return c.group.Waiting() }
