/* The launch gate (libintercept/source/gate/) and gpulimitd's side of it
 * (limiter-server/source/loop/, scheduling/), as Promela for SPIN. One
 * device; two tenants; NPROC processes (tenant 0 has NPROC - 1 of them,
 * tenant 1 one), each with a launching thread (two in process 0 with
 * -DTHREADS2) and a drain thread; the server; the GPU. Any process may be
 * SIGKILLed or SIGSTOPped at any step, and the server may die at any step.
 * README.md beside this file maps every step to the code it stands for,
 * and lists what the model leaves out.
 *
 * Each Promela statement is one atomic step; memory is sequentially
 * consistent: membarrier(2) on the drain side is what makes the launching
 * side's plain stores behave so (launching_threads.h). -DBROKEN_NO_BARRIER
 * models the store-load reordering that membarrier prevents.
 *
 * Properties:
 *   exclusion_monitor (assert) every launch admitted under the gate, and
 *                  every kernel still on the GPU, belongs to the current
 *                  grant, or to a grant the server took back by ack timeout
 *                  (the documented drain window), or the server is gone
 *   ack assertion  (assert, at send_ack) an Ack for grant g comes after
 *                  every launch the process admitted under g or before has
 *                  left the gate and its kernels have finished
 *   ltl launches_end  every launch that begins ends, unless its process is
 *                  killed or stopped: Wants are granted whether the holder
 *                  lives, dies or stops, and the server's death wedges
 *                  nobody (weak fairness)
 *
 * Broken variants, which SPIN must reject:
 *   -DBROKEN_SKIP_DRAIN    the drain thread acks without waiting for
 *                          launches in flight or synchronising
 *   -DBROKEN_NO_BARRIER    the launching side's store of its sequence word
 *                          becomes visible after its token load (no membarrier)
 *   -DBROKEN_NO_REWANT     a waiting launch sends Want only once, however the
 *                          grant changes
 *   -DBROKEN_NO_CLOSE_WAKE the session's close() does not wake its waiters
 *   -DBROKEN_STALE_REVOKE  drain() before its fix: the grant read after the
 *                          token load, the token not checked again (SPIN
 *                          found this; README.md)
 *   -DBROKEN_NO_CLEAR      gpulimitd before its fix: no clear of the token
 *                          between a release and the grant right behind it
 *   -DBROKEN_UNTIMED_WAITS the waits before their fix: a waiting launch, and
 *                          the drain thread on a revoke it acknowledged,
 *                          sleep until woken, however long
 */

#ifndef NPROC
#define NPROC 2         /* processes: 0 .. NPROC-2 of tenant 0, NPROC-1 of tenant 1 */
#endif
#ifndef LAUNCHES
#define LAUNCHES 1      /* launches per launching thread */
#endif
#ifdef THREADS2
#define NTH (NPROC + 1) /* launching threads: one per process, a second in process 0 */
#else
#define NTH NPROC
#endif
#define MAXK 3          /* kernels a process queues at most (ghost array size) */
#define NONE 255

#define TEN(p) ((p) == NPROC - 1 -> 1 : 0)
#define HELD(t) (((t) + 1) * 2)          /* shm::token_held(t + 1) */
#define REVOKED(t) (((t) + 1) * 2 + 1)   /* shm::token_revoked(t + 1) */

mtype = { WANT, ACK };

/* ---- the board (shm/include/gpulimit/shm/board.h) ---- */
byte token;             /* BoardDevice::token, a futex word */
byte grant;             /* BoardDevice::grant */
bool sleeping[NTH + NPROC];  /* futex waiters on `token`: launching threads, then drain threads */
/* Asleep on a word that a grant has already moved and moved back since the
 * thread last looked at `grant`: a wake lost before the futex call. Only
 * such a sleeper's bounded wait is let run out. A bounded wait that runs
 * out otherwise finds nothing new and goes back to sleep on the same word
 * with nothing sent, a stutter (the drain thread may see its sequence
 * word move meanwhile, and waits the longer); and every move of the token
 * while a thread sleeps ends in a wake (set_token), or the server is gone
 * and close() wakes it. */
bool stale[NTH + NPROC];
/* A waiting launch's bound runs out in the model only while nothing else
 * would end its wait: the server neither counts its tenant as wanting nor
 * has a message of its process to read, and the tenant does not hold the
 * token. Otherwise a grant, and its wake, is coming; the Want the thread
 * would send again changes nothing at a server that counts the tenant as
 * wanting already. */
#ifdef DEAD_SERVER_RESET
/* the reduction below: once the server is dead, any stale sleeper's bound
 * may run out (more behaviour than without it, not less) */
#define FORGOTTEN(p) (server_dead || \
                      (!seat_wanting[TEN(p)] && len(to_server[p]) == 0 && holder != TEN(p)))
#else
#define FORGOTTEN(p) (!seat_wanting[TEN(p)] && len(to_server[p]) == 0 && holder != TEN(p))
#endif

/* ---- the connections: one per process, in order ---- */
chan to_server[NPROC] = [3] of { mtype, byte };

/* ---- gpulimitd ---- */
byte holder = NONE;     /* TokenScheduler::Device::holder */
bool revoked;           /* TokenScheduler::Device::revoked */
bool seat_wanting[2];   /* TokenScheduler::Seat::wanting */
bool connected[NPROC];  /* TenantRegistry: the process's connection */
bool proc_wants[NPROC]; /* ProcessRecord::wants */
byte hs_holder = NONE;  /* HandoffTracker::Handshake */
byte hs_grant;
bool hs_revoked;
bool owing[NPROC];
bool server_dead;
bool grant_pending;     /* a grant's number is out, its token not yet (TokenBoard::grant) */

/* ---- the processes ---- */
bool killed[NPROC];
bool stopped[NPROC];
bool ungated[NPROC];    /* current_view is the open view (go_ungated) */
bool closed[NPROC];     /* GateSession::closed_ */
byte waiters[NPROC];    /* GateSession::waiters_ */
bool conn_closed[NPROC];/* GateConnection::closed_ */
byte seq[NTH];          /* LaunchSlot::sequence, modulo 4: odd inside a launch */
#ifdef BROKEN_NO_BARRIER
bool seq_pending[NTH];  /* the store of an odd sequence still in the store buffer */
#endif

/* ---- ghosts ---- */
byte token_grant;       /* the grant the token word's value belongs to */
byte cur_grant;         /* the server's current holder's grant; 0: none */
int forced;             /* bit g: grant g was taken back by ack timeout */
bool admitted[NTH];     /* between a token check that let the launch pass and leave_launch */
byte admitted_grant[NTH];
byte queued[NPROC];     /* kernels the process has queued */
byte done[NPROC];       /* of which the GPU has finished */
byte kernel_grant[NPROC * MAXK];
bool busy[NTH];         /* inside launch() */

#define LEGIT(g) (server_dead || (g) == cur_grant || (forced & (1 << (g))))
#define THREAD_OK(th) (!admitted[th] || admitted_grant[th] == 0 || LEGIT(admitted_grant[th]))
#define KERNEL_OK(p, k) (k < done[p] || k >= queued[p] || kernel_grant[(p) * MAXK + k] == 0 || \
                         LEGIT(kernel_grant[(p) * MAXK + k]))
#define PROC_OK(p) (KERNEL_OK(p, 0) && KERNEL_OK(p, 1) && KERNEL_OK(p, 2))
#if NPROC == 2
#define KERNELS_OK (PROC_OK(0) && PROC_OK(1))
#elif NPROC == 3
#define KERNELS_OK (PROC_OK(0) && PROC_OK(1) && PROC_OK(2))
#endif
#if NTH == 2
#define THREADS_OK (THREAD_OK(0) && THREAD_OK(1))
#elif NTH == 3
#define THREADS_OK (THREAD_OK(0) && THREAD_OK(1) && THREAD_OK(2))
#elif NTH == 4
#define THREADS_OK (THREAD_OK(0) && THREAD_OK(1) && THREAD_OK(2) && THREAD_OK(3))
#endif
#define EXCLUSIVE (KERNELS_OK && THREADS_OK)

/* futex_wake_all(token): every thread asleep on the word wakes */
#define WAKE_ALL i = 0; do :: i < NTH + NPROC -> sleeping[i] = false; i++ :: else -> break od; i = 0
inline wake_all() {
  d_step { WAKE_ALL }
}

/* =====================================================================
 * gpulimitd
 * ===================================================================== */

/* TokenBoard::set_token: the store, and its wake right behind it (one step:
 * a waiter checks the word as it goes to sleep, futex_wait) */
inline set_token(value, g) {
  d_step { token = value; token_grant = g; WAKE_ALL }
}

/* TokenScheduler::grant of the best waiter (vtime and priority abstracted:
 * any wanting tenant), applied: TokenBoard::grant (the token cleared with no
 * wake, the grant's number, then the token and the wake),
 * HandoffTracker::granted, TenantRegistry::clear_wants. */
inline grant_best_waiter() {
  if
  :: holder == NONE && seat_wanting[0] -> t = 0
  :: holder == NONE && seat_wanting[1] -> t = 1
  :: else -> t = NONE
  fi;
  if
  :: t != NONE ->
     d_step {
       seat_wanting[t] = false; holder = t; revoked = false;
#ifndef BROKEN_NO_CLEAR
       token = 0; token_grant = 0;
#endif
       grant++; cur_grant = grant;
       hs_holder = t; hs_grant = grant; hs_revoked = false;
       i = 0;
       do
       :: i < NPROC -> owing[i] = false; if :: TEN(i) == t -> proc_wants[i] = false :: else fi; i++
       :: else -> break
       od;
       i = 0
     };
     grant_pending = true                         /* the token's store: flush_grant */
  :: else
  fi;
  t = 0
}

/* TokenScheduler::release, then reconsider: the next grant, if anyone
 * wants the token; apply_token_changes clears the board's word (with a wake)
 * only when no grant follows, and a grant clears it first itself (with no
 * wake). `why_forced`: an ack timeout (kAckTimeout). */
inline release_then_reconsider(why_forced) {
  d_step {
    if :: why_forced -> forced = forced | (1 << cur_grant) :: else fi;
    holder = NONE; revoked = false; cur_grant = 0;
    hs_holder = NONE; hs_revoked = false;
    i = 0;
    do :: i < NPROC -> owing[i] = false; i++ :: else -> break od;
    i = 0
  };
  /* BROKEN_NO_CLEAR, the code before its fix: the grant does not clear the
   * word, so the board shows the next grant's number beside the old revoked
   * token */
  if
  :: seat_wanting[0] || seat_wanting[1] -> grant_best_waiter()
  :: else -> set_token(0, 0)
  fi
}

/* TokenScheduler::revoke, applied: TokenBoard::revoke, a Want that came
 * while the tenant held the token counted now, HandoffTracker::revoked with
 * the processes that see the device; complete at once when none does. */
inline revoke_holder() {
  d_step {
    revoked = true;
    hs_revoked = true;
    i = 0;
    do
    :: i < NPROC ->
       if :: TEN(i) == holder && proc_wants[i] -> seat_wanting[holder] = true :: else fi;
       owing[i] = (TEN(i) == holder && connected[i]);
       i++
    :: else -> break
    od;
    i = 0
  };
  set_token(REVOKED(holder), cur_grant);
  /* one line per NPROC: SPIN's parser takes no guard split by #if */
  if
#if NPROC == 3
  :: !owing[0] && !owing[1] && !owing[2] -> release_then_reconsider(false)
#else
  :: !owing[0] && !owing[1] -> release_then_reconsider(false)
#endif
  :: else
  fi
}

#if NPROC == 2
#define NONE_OWING (!owing[0] && !owing[1])
#define OWING_STOPPED ((owing[0] && stopped[0]) || (owing[1] && stopped[1]))
#define SIBLING_CONNECTED(p) false
#define SIBLING_WANTS(p) false
#elif NPROC == 3
#define NONE_OWING (!owing[0] && !owing[1] && !owing[2])
#define OWING_STOPPED ((owing[0] && stopped[0]) || (owing[1] && stopped[1]) || \
                       (owing[2] && stopped[2]))
/* the other process of tenant 0 */
#define SIBLING(p) (1 - (p))
#define SIBLING_CONNECTED(p) (TEN(p) == 0 && connected[SIBLING(p)])
#define SIBLING_WANTS(p) (TEN(p) == 0 && connected[SIBLING(p)] && proc_wants[SIBLING(p)])
#endif

/* A quantum lasts long enough for the holder's threads that wait for the
 * token to wake and reach the gate: it ends only while each launching
 * thread of the holder is out of launch(), or past a check that let it
 * through, or its process is killed or stopped. */
#define DONE_OR_FAULTED(th, p) (TEN(p) != holder || !busy[th] || admitted[th] || killed[p] || \
                                stopped[p])
#ifdef THREADS2
#define QUANTUM_USED (DONE_OR_FAULTED(0, 0) && DONE_OR_FAULTED(1, 1) && \
                      (NPROC == 2 || DONE_OR_FAULTED(2, 2)) && DONE_OR_FAULTED(NPROC, 0))
#else
#define QUANTUM_USED (DONE_OR_FAULTED(0, 0) && DONE_OR_FAULTED(1, 1) && \
                      (NPROC == 2 || DONE_OR_FAULTED(2, 2)))
#endif

inline handle_message() {
  if
  :: !connected[p] -> skip                            /* closed already: dropped */
  :: connected[p] && m == WANT -> on_want(p)
  :: connected[p] && m == ACK -> on_ack(p, g)
  fi;
  m = 0; g = 0; p = 0
}

/* handle_tenant_message: Want. TokenScheduler::set_wanting ignores a Want of
 * the holder while it holds the token unrevoked. */
inline on_want(p) {
  d_step {
    proc_wants[p] = true;
    if
    :: !seat_wanting[TEN(p)] && !(holder == TEN(p) && !revoked) -> seat_wanting[TEN(p)] = true
    :: else
    fi
  };
  if :: holder == NONE -> grant_best_waiter() :: else fi
}

/* handle_tenant_message: Ack. HandoffTracker::ack, then holder_drained. */
inline on_ack(p, g) {
  if
  :: hs_holder == TEN(p) && hs_grant == g && hs_revoked && owing[p] ->
     owing[p] = false;
     if
     :: NONE_OWING && holder == TEN(p) && revoked -> release_then_reconsider(false)
     :: else
     fi
  :: else                                             /* kStale or kNoted */
  fi
}

/* close_connection -> leave_tenant: HandoffTracker::process_left, then the
 * tenant leaves the device if no other process of it sees it
 * (leave_device: release if it holds the token, its seat dropped), or its
 * want is dropped if no other process of it wants. */
inline on_close(p) {
  d_step {
    connected[p] = false;
    if :: hs_revoked && owing[p] -> owing[p] = false; drained = NONE_OWING :: else fi
  };
  if
  :: drained && holder == TEN(p) && revoked -> drained = false; release_then_reconsider(false)
  :: else -> drained = false
  fi;
  if
  :: !SIBLING_CONNECTED(p) ->
     seat_wanting[TEN(p)] = false;
     if
     :: holder == TEN(p) -> release_then_reconsider(false)
     :: else
     fi
  :: SIBLING_CONNECTED(p) && proc_wants[p] && !SIBLING_WANTS(p) ->
     seat_wanting[TEN(p)] = false
  :: else
  fi;
  proc_wants[p] = false;
  if :: holder == NONE -> grant_best_waiter() :: else fi
}

/* The event loop (Server::run): one event at a time, a message, a hangup
 * or a deadline. A dead process's messages are read before its hangup
 * (connection_ready). The deadlines (after_events ->
 * TokenScheduler::advance): a quantum's end while another tenant waits (the
 * holder keeping the token for another quantum is the same as the end
 * coming later), and the ack timeout, which forces the token back from a
 * holder that does not drain. The timeout is taken to pass only while a
 * process that owes its Ack is stopped (-DANY_ACK_TIMEOUT: at any time). */
/* The second half of TokenBoard::grant: the token, then the wake. A step
 * of its own, so that processes see the board between the grant's number
 * and its token. */
inline flush_grant() {
  if
  :: grant_pending -> d_step { token = HELD(holder); token_grant = grant; WAKE_ALL; grant_pending = false }
  :: else
  fi
}

proctype Server() {
  byte i, t, g, p;
  mtype m;
  bool drained;
  {
end_loop:
    do
    :: atomic { to_server[0]?m, g -> p = 0; handle_message() }; flush_grant()
    :: atomic { to_server[1]?m, g -> p = 1; handle_message() }; flush_grant()
#if NPROC == 3
    :: atomic { to_server[2]?m, g -> p = 2; handle_message() }; flush_grant()
#endif
    :: atomic { killed[0] && connected[0] && empty(to_server[0]) -> p = 0; on_close(p); p = 0 };
       flush_grant()
    :: atomic { killed[1] && connected[1] && empty(to_server[1]) -> p = 1; on_close(p); p = 0 };
       flush_grant()
#if NPROC == 3
    :: atomic { killed[2] && connected[2] && empty(to_server[2]) -> p = 2; on_close(p); p = 0 };
       flush_grant()
#endif
    :: atomic { holder != NONE && !revoked && seat_wanting[1 - holder] && QUANTUM_USED ->
         revoke_holder() };
       flush_grant()
    :: atomic { holder != NONE && revoked &&
#ifdef ANY_ACK_TIMEOUT
         true
#else
         OWING_STOPPED
#endif
         -> release_then_reconsider(true) };
       flush_grant()
    od
  } unless { server_dead }
}

/* =====================================================================
 * The process: launching threads, the drain thread, the watcher
 * ===================================================================== */

#define FAULTED(p) (killed[p] || stopped[p])

/* GateSession::wait: waiters_ raised, then closed_ checked and, if open,
 * futex_wait (asleep only if the word still holds `seen`), then waiters_
 * lowered: the Dekker pair with close(). The futex check and the closed_
 * load are one step. */
inline session_wait(p, me, seen) {
  waiters[p]++;
  d_step {
    if
    :: !closed[p] && token == seen -> sleeping[me] = true; stale[me] = (grant != wanted_grant)
    :: else
    fi
  };
#ifdef BROKEN_UNTIMED_WAITS
  !sleeping[me]
#else
  /* woken, or the bound (one quantum) runs out */
  if
  :: !sleeping[me]
  :: sleeping[me] && stale[me] && FORGOTTEN(p) -> sleeping[me] = false
  fi;
#endif
  stale[me] = false
}

/* GateConnection::send: nothing once the connection is closed; a message to
 * a dead server is lost (EPIPE) */
#define SEND(p, m, g) if :: conn_closed[p] || server_dead -> skip :: else -> to_server[p]!m, g fi

/* launch() and launch_slow_path() (launch_gate.h, launch_gate.cpp) */
proctype Launcher(byte p; byte th) {
  byte launches, tok, g, wanted_grant;
  bool wanted, passed;
  {
    do
    :: launches < LAUNCHES ->
       d_step { busy[th] = true; wanted = false;
#ifdef BROKEN_NO_BARRIER
                seq_pending[th] = true                /* enter_launch, in the store buffer */
#else
                seq[th] = (seq[th] + 1) % 4           /* enter_launch */
#endif
       };
       do
       :: d_step {
            /* current_view.load, then the token check */
            tok = token;
            passed = ungated[p] || tok == HELD(TEN(p));
            if
            :: passed -> admitted[th] = true; admitted_grant[th] = (ungated[p] -> 0 : token_grant)
            :: else
            fi;
            tok = tok
          };
#ifdef BROKEN_NO_BARRIER
          /* the odd sequence leaves the store buffer only now */
          d_step { if :: seq_pending[th] -> seq[th] = (seq[th] + 1) % 4; seq_pending[th] = false :: else fi };
#endif
          if
          :: passed ->
             d_step {                                 /* the driver call queues the kernel; leave_launch */
               kernel_grant[p * MAXK + queued[p]] = admitted_grant[th];
               queued[p]++;
               seq[th] = (seq[th] + 1) % 4; admitted[th] = false
             };
             break
          :: else
          fi;
          /* out of the launch while waiting; the grant read; Want again when
           * the grant changed since the last one (launch_gate.cpp) */
          atomic {
            seq[th] = (seq[th] + 1) % 4;
            g = grant;
            if
#ifdef BROKEN_NO_REWANT
            :: !wanted ->
#else
            :: !wanted || g != wanted_grant ->
#endif
               SEND(p, WANT, 0);
               wanted = true;
               wanted_grant = g
            :: else
            fi;
            g = 0
          };
          session_wait(p, th, tok);
          d_step { waiters[p]--;
#ifdef BROKEN_NO_BARRIER
                   seq_pending[th] = true
#else
                   seq[th] = (seq[th] + 1) % 4        /* enter_launch */
#endif
          }
       od;
       skip;
       d_step { busy[th] = false; launches++; tok = 0; wanted_grant = 0; wanted = false; passed = false }
    :: launches == LAUNCHES -> break
    od;
end_done:
    (false)
  } unless { FAULTED(p) }
}

/* The drain thread (drain_thread.cpp drain()), Idle reports left out */
proctype Drainer(byte p) {
  byte i, tok, g, acked, s, target;
  bool acked_any;
  byte me = NTH + p;
  {
end_loop:
    do
    :: closed[p] -> break
    :: !closed[p] ->
       tok = token;
       if
       :: tok == REVOKED(TEN(p)) ->
          g = grant;
#ifndef BROKEN_STALE_REVOKE
          /* the token again: still revoked(me), so `grant` named this revoke */
          if
          :: token != tok -> goto next
          :: else
          fi;
#endif
          if
          :: !(acked_any && acked == g) ->
#ifndef BROKEN_SKIP_DRAIN
             /* wait_for_launches_in_flight: each launching thread of the process */
             s = seq[p];
             if :: s % 2 == 1 -> seq[p] != s :: else fi;
#ifdef THREADS2
             if
             :: p == 0 -> s = seq[NPROC]; if :: s % 2 == 1 -> seq[NPROC] != s :: else fi
             :: else
             fi;
#endif
             /* drain_device: cuCtxSynchronize */
             target = queued[p];
             done[p] >= target;
#endif
             /* send_ack: nothing of grant g or before is left */
             atomic {
               i = 0;
               do
               :: i < MAXK ->
                  assert(i < done[p] || i >= queued[p] || kernel_grant[p * MAXK + i] == 0 ||
                         kernel_grant[p * MAXK + i] > g);
                  i++
               :: else -> break
               od;
               assert(!admitted[p] || admitted_grant[p] == 0 || admitted_grant[p] > g);
#ifdef THREADS2
               assert(p != 0 || !admitted[NPROC] || admitted_grant[NPROC] == 0 ||
                      admitted_grant[NPROC] > g);
#endif
               i = 0; s = 0; target = 0;
               SEND(p, ACK, g);
               acked_any = true;
               acked = g;
               g = 0
             };
             goto next                                /* continue */
          :: else
          fi
       :: else
       fi;
       /* session.wait(device.token, token): asleep for good while nobody
        * revokes, a valid end; on a revoke already acknowledged,
        * wait_for(quarter quantum) (`stale`: see session_wait) */
       waiters[p]++;
       d_step {
         if
         :: !closed[p] && token == tok ->
            sleeping[me] = true; stale[me] = (tok == REVOKED(TEN(p)) && grant != acked)
         :: else
         fi;
         g = 0
       };
end_asleep:
       if
       :: !sleeping[me]
#ifndef BROKEN_UNTIMED_WAITS
       :: sleeping[me] && stale[me] -> sleeping[me] = false
#endif
       fi;
       stale[me] = false;
       waiters[p]--;
next:
       skip
    od;
end_done:
    (false)
  } unless { FAULTED(p) }
}

/* The watcher threads (connection_watcher.cpp watch(), server_gone): the
 * server's hangup seen, the open view published, the session closed, its
 * waiters woken until none is left, the connection closed. */
proctype Watchers() {
  byte p, i;
end_wait:
  server_dead;
  do
  :: p < NPROC ->
     if
     :: !FAULTED(p) -> ungated[p] = true
     :: else
     fi;
     if
     :: !FAULTED(p) -> closed[p] = true
     :: else
     fi;
#ifndef BROKEN_NO_CLOSE_WAKE
     do
     :: FAULTED(p) -> break
     :: !FAULTED(p) ->
        wake_all();
        if :: waiters[p] == 0 -> break :: else fi
     od;
#endif
     if
     :: !FAULTED(p) -> conn_closed[p] = true
     :: else
     fi;
     p++
  :: else -> break
  od
}

/* The device: kernels finish in order, whatever their process is doing. A
 * killed process's context goes with it. */
active proctype GPU() {
end_loop:
  do
  :: d_step { !killed[0] && done[0] < queued[0] -> done[0]++ }
  :: d_step { !killed[1] && done[1] < queued[1] -> done[1]++ }
#if NPROC == 3
  :: d_step { !killed[2] && done[2] < queued[2] -> done[2]++ }
#endif
  od
}

/* SIGKILL or SIGSTOP of processes, the server's death: at any step, at
 * most MAXFAULTS of them. With -DNO_KILL -DNO_STOP the process chosen
 * matters to nothing, so -DFAULTY_PROC0 leaves out states and no
 * behaviour. */
#ifndef MAXFAULTS
#define MAXFAULTS 1
#endif
/* -DDEAD_SERVER_RESET, a reduction of the state space: at the server's
 * death, gpulimitd's own state, its ghosts and its unread messages are
 * reset to one value. Nothing reads them once the server is dead (LEGIT
 * and SEND look at server_dead first, FORGOTTEN too with the reduction),
 * so the states that differ only in them are one; the board's words
 * (token, grant, token_grant) and the processes' state stay as they were. */
#ifdef DEAD_SERVER_RESET
/* up to its 3 messages: no loop (a loop here trips SPIN's code generator) */
#define FORGET_ONE(c) if :: nempty(c) -> c?_, _ :: else fi
#define FORGET_CHAN(c) FORGET_ONE(c); FORGET_ONE(c); FORGET_ONE(c)
#if NPROC == 2
#define FORGET_PROCS connected[0] = false; connected[1] = false; proc_wants[0] = false; \
                     proc_wants[1] = false; owing[0] = false; owing[1] = false; \
                     FORGET_CHAN(to_server[0]); FORGET_CHAN(to_server[1])
#elif NPROC == 3
#define FORGET_PROCS connected[0] = false; connected[1] = false; connected[2] = false; \
                     proc_wants[0] = false; proc_wants[1] = false; proc_wants[2] = false; \
                     owing[0] = false; owing[1] = false; owing[2] = false; \
                     FORGET_CHAN(to_server[0]); FORGET_CHAN(to_server[1]); FORGET_CHAN(to_server[2])
#endif
#define FORGET_SERVER holder = NONE; revoked = false; seat_wanting[0] = false; \
                      seat_wanting[1] = false; hs_holder = NONE; hs_grant = 0; hs_revoked = false; \
                      grant_pending = false; cur_grant = 0; forced = 0; FORGET_PROCS
#else
#define FORGET_SERVER skip
#endif
active proctype Faults() {
  byte faults, p;
end_loop:
  do
  :: faults < MAXFAULTS ->
     if
     :: p = 0
#ifndef FAULTY_PROC0                                  /* faults of process 0 only */
     :: p = 1
#if NPROC == 3
     :: p = 2
#endif
#endif
     fi;
     if
#ifndef NO_KILL
     /* the launch in flight and the kernels queued go with the process */
     :: !FAULTED(p) -> d_step { killed[p] = true; done[p] = queued[p]; admitted[p] = false;
#ifdef THREADS2
                                if :: p == 0 -> admitted[NPROC] = false :: else fi;
#endif
                                faults++; p = 0 }
#endif
#ifndef NO_STOP
     :: !FAULTED(p) -> d_step { stopped[p] = true; faults++; p = 0 }
#endif
#ifndef NO_SERVER_DEATH
     :: !server_dead -> d_step { server_dead = true; faults++; p = 0; FORGET_SERVER }
#endif
     :: else -> p = 0
     fi
  :: faults == MAXFAULTS -> break
  od
}

active proctype exclusion_monitor() {
end:
  d_step { !EXCLUSIVE -> assert(EXCLUSIVE) }
}

init {
  atomic {
    connected[0] = true;
    connected[1] = true;
#if NPROC == 3
    connected[2] = true;
#endif
    run Server();
    run Watchers();
    run Launcher(0, 0);
    run Launcher(1, 1);
#if NPROC == 3
    run Launcher(2, 2);
#endif
#ifdef THREADS2
    run Launcher(0, NPROC);
#endif
    run Drainer(0);
    run Drainer(1);
#if NPROC == 3
    run Drainer(2);
#endif
  }
}

#define ENDS(th, p) (!busy[th] || killed[p] || stopped[p])
#if NPROC == 2
#define ENDS_ALL ((busy[0] -> <> ENDS(0, 0)) && (busy[1] -> <> ENDS(1, 1)))
#elif NPROC == 3
#define ENDS_ALL ((busy[0] -> <> ENDS(0, 0)) && (busy[1] -> <> ENDS(1, 1)) && \
                  (busy[2] -> <> ENDS(2, 2)))
#endif
#ifdef THREADS2
ltl launches_end { [] (ENDS_ALL && (busy[NPROC] -> <> ENDS(NPROC, 0))) }
#else
ltl launches_end { [] ENDS_ALL }
#endif
