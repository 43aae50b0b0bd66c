// Package protocol is the language the master and its workers speak, and
// nothing else: paths and header names, request and response bodies, the task
// definition (TaskDef, TaskSpec) and its validation, field errors and the
// JSON error body, the MAC, signature, secret and nonce helpers of the
// handshake and registration, run reports, schedule parsing and its Plan, the
// strict JSON decoder and one small HTTP client helper (Call). Both sides
// import it; it imports only the standard library and the cron parser.
package protocol
