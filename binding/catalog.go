package binding

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/ohversion"
)

// catalog is a Resolver over a fixed set of service definitions.
type catalog struct {
	defs []*ServiceDefinition
}

// NewCatalog returns a Resolver over a fixed set of service definitions,
// defs, such as the files a developer runs deploycheck against. Each
// definition needs an org, a URL, an arch and a valid version, and no two
// may share all four. The Resolver is safe for concurrent use.
func NewCatalog(defs ...*ServiceDefinition) (Resolver, error) {
	seen := map[agreement.ServiceRef]bool{}
	var errs []error
	c := &catalog{}
	for i, d := range defs {
		if d == nil {
			errs = append(errs, fmt.Errorf("definition %d is nil", i+1))
			continue
		}
		ref := d.ref()
		if d.Org == "" || d.URL == "" || d.Arch == "" {
			errs = append(errs, fmt.Errorf("definition %d (%s) needs org, url and arch", i+1, ref))
			continue
		}
		if _, err := ohversion.Parse(d.Version); err != nil {
			errs = append(errs, fmt.Errorf("definition %d (%s): %w", i+1, ref, err))
			continue
		}
		if seen[ref] {
			errs = append(errs, fmt.Errorf("definition %d (%s) is a duplicate", i+1, ref))
			continue
		}
		seen[ref] = true
		c.defs = append(c.defs, d)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("binding: catalog: %w", err)
	}
	return c, nil
}

// ServiceVersions implements Resolver.
func (c *catalog) ServiceVersions(_ context.Context, q ServiceQuery) ([]*ServiceDefinition, error) {
	var out []*ServiceDefinition
	for _, d := range c.defs {
		if d.Org == q.Org && d.URL == q.URL && ohversion.ArchMatches(q.Arch, d.Arch) {
			out = append(out, d)
		}
	}
	return out, nil
}
