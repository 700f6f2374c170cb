//go:build planted

package planted

import (
	"fmt"
	"os"
)

// Built reports whether this binary was built with the tag "planted": it
// is, so a server reads its switches from EnvVar.
const Built = true

func init() {
	if v := os.Getenv(EnvVar); v != "" {
		if err := fromEnv(v); err != nil {
			panic(fmt.Sprint(err))
		}
	}
}
