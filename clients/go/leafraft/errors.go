package leafraft

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrorCode is one of the server's stable error codes (`docs/api.md#error-codes`), spelled as the server spells it.
// A code this version does not know is kept as it came.
type ErrorCode string

// Every code the server answers with.
const (
	NotReady           ErrorCode = "NOT_READY"
	TagNotFound        ErrorCode = "TAG_NOT_FOUND"
	SegmentsNotReady   ErrorCode = "SEGMENTS_NOT_READY"
	ClockBackwards     ErrorCode = "CLOCK_BACKWARDS"
	WorkerUnavailable  ErrorCode = "WORKER_UNAVAILABLE"
	TagExhausted       ErrorCode = "TAG_EXHAUSTED"
	NoLeader           ErrorCode = "NO_LEADER"
	InvalidArgument    ErrorCode = "INVALID_ARGUMENT"
	TagExists          ErrorCode = "TAG_EXISTS"
	MaxIDDecrease      ErrorCode = "MAX_ID_DECREASE"
	NotALearner        ErrorCode = "NOT_A_LEARNER"
	LastVoter          ErrorCode = "LAST_VOTER"
	NodeNotFound       ErrorCode = "NODE_NOT_FOUND"
	Unauthorized       ErrorCode = "UNAUTHORIZED"
	Forbidden          ErrorCode = "FORBIDDEN"
	NotFound           ErrorCode = "NOT_FOUND"
	ClusterMismatch    ErrorCode = "CLUSTER_MISMATCH"
	LearnerNotCaughtUp ErrorCode = "LEARNER_NOT_CAUGHT_UP"
	ModeMismatch       ErrorCode = "MODE_MISMATCH"
	NamespaceExists    ErrorCode = "NAMESPACE_EXISTS"
	NamespaceNotFound  ErrorCode = "NAMESPACE_NOT_FOUND"
	SecondExhausted    ErrorCode = "SECOND_EXHAUSTED"
	ClockAhead         ErrorCode = "CLOCK_AHEAD"
	FeatureNotEnabled  ErrorCode = "FEATURE_NOT_ENABLED"
	ClockUnchecked     ErrorCode = "CLOCK_UNCHECKED"
	MembersBehind      ErrorCode = "MEMBERS_BEHIND"
)

// KnownCodes lists every code this version knows, in the order of docs/api.md#error-codes.
var KnownCodes = []ErrorCode{
	NotReady, TagNotFound, SegmentsNotReady, ClockBackwards, WorkerUnavailable, TagExhausted,
	NoLeader, InvalidArgument, TagExists, MaxIDDecrease, NotALearner, LastVoter, NodeNotFound,
	Unauthorized, Forbidden, NotFound, ClusterMismatch, LearnerNotCaughtUp, ModeMismatch,
	NamespaceExists, NamespaceNotFound, SecondExhausted, ClockAhead, FeatureNotEnabled,
	ClockUnchecked, MembersBehind,
}

// Transient reports whether another node, or the same one a little later, may serve what this
// code refused: the codes the server answers with 503.
func (c ErrorCode) Transient() bool {
	switch c {
	case NotReady, SegmentsNotReady, ClockBackwards, WorkerUnavailable, NoLeader, SecondExhausted,
		ClockAhead, ClockUnchecked, MembersBehind:
		return true
	}
	return false
}

// Error is a node's error answer in the API's shape ({"error":{"code","message"}}).
// Match it with errors.As, or compare codes with leafraft.IsCode(err, leafraft.TagNotFound).
type Error struct {
	Status  int
	Code    ErrorCode
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message) }

// IsCode reports whether err is (or wraps) a server answer with this code.
func IsCode(err error, code ErrorCode) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.Code == code
}

// CodeOf answers the server's code in err, or "" when no server answered with one.
func CodeOf(err error) ErrorCode {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Code
	}
	return ""
}

// ErrTimeout is what every TimeoutError is (errors.Is(err, leafraft.ErrTimeout)).
var ErrTimeout = errors.New("leafraft: no answer in time")

// ErrClosed answers calls on a closed handle or client: its unused IDs were dropped.
var ErrClosed = errors.New("leafraft: closed: no more IDs are handed out by this handle")

// TimeoutError: the call's time budget (Config.Timeout, or the context's deadline) ran out.
// Last is the last failure seen on the way.
type TimeoutError struct {
	Waited time.Duration
	Last   string
	cause  error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("leafraft: no answer within %v; last: %s", e.Waited.Round(time.Millisecond), e.Last)
}

// Is makes errors.Is(err, ErrTimeout) true, and errors.Is(err, context.DeadlineExceeded) too when
// the context's deadline was what ran out.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

func (e *TimeoutError) Unwrap() error { return e.cause }

// TransportError: no node could be reached, or one answered something that is not the API's shape.
type TransportError struct{ Message string }

func (e *TransportError) Error() string { return "leafraft: " + e.Message }

func transient(err error) bool {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Code.Transient() || apiErr.Status >= 500
	}
	var transportErr *TransportError
	return errors.As(err, &transportErr)
}

// deadlineCause is context.DeadlineExceeded when ctx's deadline has come (the context may not
// have said so yet when a timer for the same instant fired first), else ctx.Err().
func deadlineCause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
