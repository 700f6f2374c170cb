package main

import (
	"context"

	"github.com/strand-io/strand/client"
)

// beginTxn and endTxn run a CLI produce as one transaction.
func beginTxn(ctx context.Context, p *client.Producer) error {
	if err := p.InitTransactions(ctx); err != nil {
		return err
	}
	return p.BeginTransaction()
}

func endTxn(ctx context.Context, p *client.Producer, commit bool) error {
	if commit {
		return p.CommitTransaction(ctx)
	}
	return p.AbortTransaction(ctx)
}
