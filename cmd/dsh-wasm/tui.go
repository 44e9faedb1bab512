package main

import (
	"context"
	"errors"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

func runInteractive(ctx context.Context, s streams, sess *deploy.Session, replay string) error {
	return errors.New("interactive mode is not built yet")
}
