package demo

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/edgesecrets/edgesecrets/agreement"
)

// LoadOrCreateKeys reads the agreement key set at path, or when there is
// none generates one (the default, post-quantum hybrid suite) and writes it
// there with mode 0600. It reports whether it created the keys.
func LoadOrCreateKeys(path string) (*agreement.PrivateKeys, bool, error) {
	keys, err := agreement.ReadPrivateKeysFile(path)
	if err == nil {
		return keys, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if keys, err = agreement.GenerateKeys(""); err != nil {
		return nil, false, err
	}
	if err := keys.WriteFile(path); err != nil {
		return nil, false, fmt.Errorf("writing the agreement keys: %w", err)
	}
	return keys, true, nil
}
