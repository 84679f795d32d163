package swarmjobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// FollowLost bounds how long Follow looks for a member running a job
// whose owner's stream broke: a takeover comes within seconds of gossip
// declaring the owner dead; a job none of whose holders lives waits for
// one to come back, and Follow says so instead of waiting with it.
const FollowLost = 2 * time.Minute

// followEvery is how often Follow asks the members again while it looks
// for the job's owner.
const followEvery = 500 * time.Millisecond

// Follow calls each with the record of job f as its owner streams it
// (Watch), until the job ended (it returns that record) or ctx ends. When
// the owner's stream breaks (the owner died, or stepped down for a later
// one), it asks the members (members: the membership as it is now) for the
// job again and watches the member that owns it in the newest record: a
// takeover is followed to the new owner. note, if set, is told (one line)
// when the owner changes. It fails when no member has run the job for
// lost (FollowLost if 0).
func (c *Client) Follow(ctx context.Context, members func() []Member, f *Found, lost time.Duration, note func(string), each func(*pb.Record)) (*pb.Record, error) {
	if lost <= 0 {
		lost = FollowLost
	}
	var (
		since   time.Time // when the owner's stream last broke (zero: it runs)
		lastErr error
	)
	for {
		if f.Owner != nil {
			watched := *f.Owner
			r, err := c.Watch(ctx, f, func(r *pb.Record) {
				if r.OwnerId == watched.ID {
					since = time.Time{} // the member asked runs it
				}
				each(r)
			})
			if err == nil {
				return r, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
			lastErr = err
		}
		if since.IsZero() {
			since = time.Now()
			if note != nil {
				note(fmt.Sprintf("job %s: its owner %s no longer streams it (%v); looking for the member that runs it", f.Record.Id[:12], f.Record.Owner, lastErr))
			}
		}
		if time.Since(since) > lost {
			return nil, fmt.Errorf("job %s: no member has run it for %s since its owner %s stopped streaming it: %w",
				f.Record.Id[:12], lost, f.Record.Owner, errors.Join(lastErr, errors.New("no owner found")))
		}
		select {
		case <-time.After(followEvery):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		nf := c.find(ctx, members(), f.Record.Id)
		if nf == nil {
			continue
		}
		if Ended(nf.Record.State) {
			each(nf.Record)
			return nf.Record, nil
		}
		if nf.Owner == nil {
			lastErr = fmt.Errorf("its owner %s (epoch %d) does not answer", nf.Record.Owner, nf.Record.Epoch)
			continue
		}
		if note != nil && (f.Owner == nil || nf.Owner.ID != f.Owner.ID) {
			note(fmt.Sprintf("job %s: following its owner %s (epoch %d)", nf.Record.Id[:12], nf.Owner.Name, nf.Record.Epoch))
		}
		f = nf
	}
}

// find asks members for job id: the newest record of it, and as its owner
// the member that record names, if it answered (nil if no member knows
// the job).
func (c *Client) find(ctx context.Context, members []Member, id string) *Found {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	found, _ := c.List(lctx, members)
	for _, f := range found {
		if f.Record.Id != id {
			continue
		}
		f.Owner = nil
		for _, m := range members {
			if m.ID == f.Record.OwnerId {
				f.Owner = &m
			}
		}
		return f
	}
	return nil
}
