package http1

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/internal/h1corpus"
)

// portico's limits on a request head (Envoy's defaults, which the listener
// applies): 60 KiB and 100 fields.
var porticoLimits = Limits{MaxHeadBytes: 60 << 10, MaxFields: 100}

// parserStatuses are the answers the codec itself gives to a request it
// refuses; any other answer in the corpus comes from above it (routing,
// filters, the upstream).
var parserStatuses = map[string]bool{"400": true, "413": true, "414": true, "431": true, "501": true, "505": true}

// TestCorpusRequests holds the parser to the request corpus: what it answers
// to the first request of each case (its head and body) is one the corpus
// allows. A refusal must be an allowed first answer; an accepted request
// must have an allowed outcome that is not a refusal by the codec. The rest
// of each outcome (the connection, what the backend receives) is the
// server's and the proxy's, asserted by TestH1Corpus.
func TestCorpusRequests(t *testing.T) {
	cases, err := h1corpus.Load("../internal/h1corpus/testdata/requests.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		answer := firstAnswer(c.Send)
		allowed := false
		for _, w := range c.Want {
			first := strings.Fields(w.Answer)[0]
			if first == "100" && len(strings.Fields(w.Answer)) > 1 {
				first = strings.Fields(w.Answer)[1]
			}
			if answer == "accepted" && !parserStatuses[first] && first != "timeout" || answer == first {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("%s (line %d): the codec's answer is %s; the corpus allows %v", c.Name, c.Line, answer, c.Want)
		}
	}
}

// firstAnswer reads the first request of in: "accepted", the status of the
// *Error that refused it, or "timeout" when the input ends first (the client
// would wait).
func firstAnswer(in []byte) string {
	br := bufio.NewReader(bytes.NewReader(in))
	var h Head
	err := h.ReadRequest(br, porticoLimits)
	if err == nil {
		var b BodyReader
		b.Reset(br, &h)
		_, err = io.Copy(io.Discard, &b)
	}
	switch status := statusOf(err); status {
	case 200:
		return "accepted"
	case 0:
		return "timeout"
	default:
		return strconv.Itoa(status)
	}
}
