// netguard: a Node preload (NODE_OPTIONS=--require <this file>) that keeps a program on loopback. Every DNS
// lookup of a name other than localhost, and every TCP connection to a non-loopback address, fails (ENOTFOUND /
// ECONNREFUSED) and is appended to the file named by NETGUARD_LOG, one "lookup <host>" or "connect <host:port>"
// line each, so a test can fail when the program tried to reach outside.
'use strict';
const net = require('net');
const dns = require('dns');
const fs = require('fs');

const logFile = process.env.NETGUARD_LOG;
function record(line) {
  if (logFile) {
    try { fs.appendFileSync(logFile, line + '\n'); } catch (_) { /* best effort */ }
  }
}
function loopback(host) {
  if (!host) return true;
  host = String(host).replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127\./.test(host) || /^::ffff:127\./.test(host) || host.endsWith('.localhost');
}

const origLookup = dns.lookup;
dns.lookup = function lookup(hostname, options, callback) {
  if (typeof options === 'function') { callback = options; options = {}; }
  if (!loopback(hostname) && net.isIP(String(hostname)) === 0) {
    record('lookup ' + hostname);
    const err = new Error('netguard: lookup of ' + hostname + ' blocked');
    err.code = 'ENOTFOUND';
    process.nextTick(callback, err);
    return {};
  }
  return origLookup.call(this, hostname, options, callback);
};
if (dns.promises) {
  const origP = dns.promises.lookup;
  dns.promises.lookup = function lookup(hostname, options) {
    if (!loopback(hostname) && net.isIP(String(hostname)) === 0) {
      record('lookup ' + hostname);
      const err = new Error('netguard: lookup of ' + hostname + ' blocked');
      err.code = 'ENOTFOUND';
      return Promise.reject(err);
    }
    return origP.call(this, hostname, options);
  };
}

const origConnect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function connect(...args) {
  let opts = args[0];
  if (Array.isArray(opts)) opts = opts[0]; // normalized [options, callback]
  let host, port;
  if (opts !== null && typeof opts === 'object') {
    if (opts.path) return origConnect.apply(this, args); // a unix socket
    host = opts.host; port = opts.port;
  } else {
    port = opts; host = typeof args[1] === 'string' ? args[1] : undefined;
  }
  if (!loopback(host)) {
    record('connect ' + host + ':' + port);
    const err = new Error('netguard: connection to ' + host + ':' + port + ' blocked');
    err.code = 'ECONNREFUSED';
    process.nextTick(() => this.destroy(err));
    return this;
  }
  return origConnect.apply(this, args);
};
