package job

import (
	"context"
	"errors"
	"sync"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// published is the job's hello to peers, made once per run: the plugin
// and the inputs put into the block store (chunked, hashed and written:
// a tenth of a second for a 19 MB plugin on a loaded machine). startPublish
// begins it when the run starts, beside the plugin's first start and the
// opening of the job database, so that the first peer to enrol does not
// wait for it.
type published struct {
	start sync.Once
	done  chan struct{}
	hello *peerpb.Hello
	err   error
}

// startPublish begins publishing in the background, in ctx; stop ends it
// and waits (the store is the node's, closed after the run). Without a
// remote store there is nothing to publish.
func (r *runner) startPublish(ctx context.Context) (stop func()) {
	ro := r.opts.Remote
	if ro == nil || ro.Store == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	r.pub.start.Do(func() {
		r.pub.done = make(chan struct{})
		go func() {
			defer close(r.pub.done)
			r.pub.hello, r.pub.err = r.buildHello(ctx)
		}()
	})
	return func() {
		cancel()
		<-r.pub.done
	}
}

// publish waits for the hello startPublish makes (or ctx).
func (r *runner) publish(ctx context.Context) (*peerpb.Hello, error) {
	if r.pub.done == nil {
		return nil, errors.New("publish the job: no block store to serve it from")
	}
	select {
	case <-r.pub.done:
		return r.pub.hello, r.pub.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
