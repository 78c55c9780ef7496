package combine_test

import (
	"bufio"

	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"shardproxy/resp"
)

// redisStore is a raw RESP2 client for the verified load: GET, SET
// (with PX for a TTL), DEL.
type redisStore struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialRedis(addr string) (store, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &redisStore{nc: nc, r: bufio.NewReader(nc)}, nil
}

func (c *redisStore) close() { c.nc.Close() }

// do sends a command and returns its reply's first line, and a bulk
// string's data.
func (c *redisStore) do(args ...string) (line, data string, err error) {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	bs := make([][]byte, len(args)-1)
	for i, a := range args[1:] {
		bs[i] = []byte(a)
	}
	if _, err := c.nc.Write(resp.EncodeCommand(args[0], bs)); err != nil {
		return "", "", err
	}
	line, err = c.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "$") || line == "$-1\r\n" {
		return line, "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return line, "", err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return line, "", err
	}
	return line, string(body[:n]), nil
}

func (c *redisStore) get(key string) (string, bool, error) {
	line, data, err := c.do("GET", key)
	switch {
	case err != nil:
		return "", false, err
	case line == "$-1\r\n":
		return "", false, nil
	case line[0] == '$':
		return data, true, nil
	}
	return "", false, &errReply{line}
}

func (c *redisStore) set(key, val string, ttl int) error {
	args := []string{"SET", key, val}
	if ttl > 0 {
		args = append(args, "PX", strconv.Itoa(ttl*1000))
	}
	line, _, err := c.do(args...)
	if err == nil && line != "+OK\r\n" {
		err = &errReply{line}
	}
	return err
}

func (c *redisStore) del(key string) error {
	line, _, err := c.do("DEL", key)
	if err == nil && line != ":1\r\n" && line != ":0\r\n" {
		err = &errReply{line}
	}
	return err
}
