package fleet

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// Traffic counts what one etcd client sends and receives: RPCs begun
// (unary requests and streams), messages and their bytes on the wire.
type Traffic struct {
	RPCs, MessagesSent, MessagesReceived, BytesSent, BytesReceived int64
}

// meter is the gRPC stats handler behind an Agent's Traffic.
type meter struct {
	rpcs, msgsOut, msgsIn, bytesOut, bytesIn atomic.Int64
}

var _ stats.Handler = (*meter)(nil)

func (m *meter) dialOption() grpc.DialOption { return grpc.WithStatsHandler(m) }

func (m *meter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (m *meter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.Begin:
		m.rpcs.Add(1)
	case *stats.OutPayload:
		m.msgsOut.Add(1)
		m.bytesOut.Add(int64(s.WireLength))
	case *stats.InPayload:
		m.msgsIn.Add(1)
		m.bytesIn.Add(int64(s.WireLength))
	}
}

func (m *meter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (m *meter) HandleConn(context.Context, stats.ConnStats) {}

func (m *meter) traffic() Traffic {
	return Traffic{RPCs: m.rpcs.Load(), MessagesSent: m.msgsOut.Load(), MessagesReceived: m.msgsIn.Load(),
		BytesSent: m.bytesOut.Load(), BytesReceived: m.bytesIn.Load()}
}
