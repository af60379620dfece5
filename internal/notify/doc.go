// Package notify tells people outside toold of calls that wait for them:
// a Webhook posts a message to a chat channel for each call that starts
// waiting for approval.
//
// It is a package of its own, not part of the console or of executions:
// the console only serves static files and is a client of the API like
// curl; executions keeps the state of calls and never dials out. The
// webhook is an outbound client fed by executions' OnApproval hook (which
// cmd/toold wires), and like every outbound client it dials through
// internal/netguard.
package notify
