package hcm

import "net/http"

// A forwarded request goes upstream as a copy of the client's request with
// the target as its context. r.WithContext makes that copy in an allocation
// of its own, the largest a request made (some 300 of its 800 bytes), and
// http.Request has no other way to set a context. A kept stream therefore
// keeps its upstream request too: made once with its own target as context
// (whose address does not change from request to request), and given each
// request's fields by copyRequestFields, which leaves that context alone.

// upstreamRequest returns the kept stream's upstream request for r, its
// target's context.
func (k *keptStream) upstreamRequest(r *http.Request) *http.Request {
	if k.out == nil {
		k.out = (&http.Request{}).WithContext(&k.target)
	}
	copyRequestFields(k.out, r)
	return k.out
}

// forgetUpstreamRequest drops what the kept upstream request holds of the
// last request (its header, body, URL), keeping its context.
func (k *keptStream) forgetUpstreamRequest() {
	if k.out != nil {
		copyRequestFields(k.out, &http.Request{})
	}
}

// copyRequestFields sets every exported field of dst to src's, as *dst = *src
// would without the context (and net/http's ServeMux state, which the
// proxy's requests never have). TestCopyRequestFieldsCoversEveryField fails
// when net/http adds a field.
func copyRequestFields(dst, src *http.Request) {
	dst.Method, dst.URL = src.Method, src.URL
	dst.Proto, dst.ProtoMajor, dst.ProtoMinor = src.Proto, src.ProtoMajor, src.ProtoMinor
	dst.Header, dst.Body, dst.GetBody = src.Header, src.Body, src.GetBody
	dst.ContentLength, dst.TransferEncoding, dst.Close = src.ContentLength, src.TransferEncoding, src.Close
	dst.Host, dst.Form, dst.PostForm, dst.MultipartForm = src.Host, src.Form, src.PostForm, src.MultipartForm
	dst.Trailer, dst.RemoteAddr, dst.RequestURI, dst.TLS = src.Trailer, src.RemoteAddr, src.RequestURI, src.TLS
	//lint:ignore SA1019 a deprecated field is still copied, as WithContext's copy does
	dst.Cancel, dst.Response, dst.Pattern = src.Cancel, src.Response, src.Pattern
}
