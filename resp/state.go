package resp

import (
	"crypto/sha256"
	"errors"

	"shardproxy/codec"
)

var _ codec.StateSaver = (*parser)(nil)

// stateVersion is the first byte of a saved state: a process that cannot
// read a newer layout refuses it rather than guess.
const stateVersion = 1

// The saved state: stateVersion, a flags byte (stateAuthed), the protocol
// (0 or 3), the first 8 bytes of the credentials' digest (stateHead bytes
// in all), then the client's name.
const (
	stateAuthed = 1
	stateHead   = 3 + 8
)

var errState = errors.New("resp: unreadable session state")

// AppendState implements codec.StateSaver.
func (p *parser) AppendState(dst []byte) []byte {
	var flags byte
	if p.authed {
		flags |= stateAuthed
	}
	sum := p.credentials()
	dst = append(dst, stateVersion, flags, p.proto)
	dst = append(dst, sum[:8]...)
	return append(dst, p.name...)
}

// RestoreState implements codec.StateSaver: the protocol and the name
// come back; the authentication only when the parser's credentials are
// the ones it was given under (or it needs none).
func (p *parser) RestoreState(b []byte) error {
	if len(b) < stateHead || b[0] != stateVersion || b[1]&^stateAuthed != 0 || b[2] != 0 && b[2] != 3 {
		return errState
	}
	sum := p.credentials()
	p.authed = p.password == "" || b[1]&stateAuthed != 0 && string(sum[:8]) == string(b[3:stateHead])
	p.proto = b[2]
	p.name = append(p.name[:0], b[stateHead:]...)
	p.publish()
	return nil
}

// credentials returns the digest of the parser's user and password.
func (p *parser) credentials() [sha256.Size]byte {
	return sha256.Sum256([]byte(p.username + "\x00" + p.password))
}
