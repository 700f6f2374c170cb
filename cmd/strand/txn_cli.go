package main

import (
	"context"
	"errors"

	"github.com/strand-io/strand/client"
)

// beginTxn and endTxn run a CLI produce as one transaction.
func beginTxn(ctx context.Context, p *client.Producer) error {
	return errors.New("transactions are not available in this build")
}

func endTxn(ctx context.Context, p *client.Producer, commit bool) error {
	return errors.New("transactions are not available in this build")
}
