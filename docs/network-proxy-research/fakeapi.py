#!/usr/bin/python3
# Loopback stand-in for the API server: lists the grant ConfigMaps in
# grants.json, and holds each watch open (chunked, silent) until its timeout.
import json, sys, time, http.server, socketserver, urllib.parse as u
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def do_GET(self):
        q = u.parse_qs(u.urlparse(self.path).query)
        if 'watch' in q:
            self.send_response(200); self.send_header('Content-Type', 'application/json')
            self.send_header('Transfer-Encoding', 'chunked'); self.end_headers(); self.wfile.flush()
            time.sleep(min(int(q.get('timeoutSeconds', ['60'])[0]), 600))
            self.wfile.write(b'0\r\n\r\n'); return
        items = json.load(open(sys.argv[2]))
        body = json.dumps({'kind': 'ConfigMapList', 'apiVersion': 'v1', 'metadata': {'resourceVersion': '5'}, 'items': items}).encode()
        self.send_response(200); self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
S(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
