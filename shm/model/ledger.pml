/* The tenant memory ledger (shm/source/tenant_ledger.cpp, reaper.cpp), as
 * Promela for SPIN. One device, NSLOT process slots, NPROC processes of one
 * tenant that attach, reserve and release one unit at a time and may be
 * SIGKILLed at any step, and the server's reaper child (a second reaper,
 * which may be killed too). README.md beside this file maps every step to
 * the code it stands for, and lists what the model leaves out.
 *
 * Each Promela statement is one atomic step; the memory is sequentially
 * consistent (the code's Dekker pairs are seq_cst; see README.md).
 *
 * Properties:
 *   cap_monitor    (assert) used <= CAP, and the memory the tenant's
 *                  processes really hold (not yet exited) <= CAP, always
 *   exact_monitor  (assert) once every dead process is reaped and nothing
 *                  is in flight, used == what the live processes hold
 *   ltl no_wait_forever  every reserve or release a process begins ends,
 *                  unless the process dies (weak fairness)
 *
 * Broken variants, which SPIN must reject:
 *   -DBROKEN_NO_CAS        R4 as a load and a plain store, not a CAS
 *   -DBROKEN_NO_SEQ_CHECK  R2 skipped: reservers ignore a recount
 *   -DBROKEN_COUNT_DEAD    C4 sums the dead slots' held too
 *   -DBROKEN_NO_TAKEOVER   a reserver waiting on an odd sequence never takes
 *                          the mutex of a dead reaper (wait_for_recount's
 *                          trylock left out)
 */

#ifndef NPROC
#define NPROC 2         /* tenant processes */
#endif
#ifndef NSLOT
#define NSLOT 2         /* ProcessSlot entries (kMaxProcesses) */
#endif
#ifndef CAP
#define CAP 1           /* DeviceEntry::cap, in units */
#endif
#ifndef OPS
#define OPS 2           /* reserves/releases per process */
#endif

#define NONE 255
#define SERVER NPROC    /* the server's reaper child: an id, no slot */

byte used;              /* DeviceEntry::used */
byte held[NSLOT];       /* ProcessSlot::held[d] */
byte inflight[NSLOT];   /* ProcessSlot::inflight */
byte slotpid[NSLOT];        /* ProcessSlot::pid: 0 free, else process id + 1 */
byte recount_seq;       /* LedgerLayout::recount_seq */
byte mutex = NONE;      /* LedgerLayout::reaper_mutex: its owner */
byte lockholder[NSLOT]; /* the slot's OFD liveness lock: held by process id, or NONE */

bool killed[NPROC + 1]; /* SIGKILL delivered: the process takes no more steps */
bool exited[NPROC + 1]; /* the kernel has finished its exit: locks dropped, memory freed */

/* Ghosts, for the properties. */
byte owns[NPROC];       /* device memory process p holds (committed by its R4) */
byte phys;              /* sum of owns[p] over the processes not exited */
bool busy[NPROC];       /* p is inside reserve() or release() */

/* Everything a dead process held is back: no dead process's slot is taken
 * and none is still exiting; no recount, attach or detach under way; no
 * thread in flight. */
#define SLOT_SETTLED(i) (slotpid[i] == 0 || !killed[slotpid[i] - 1])
#define QUIET(i) (inflight[i] == 0 && SLOT_SETTLED(i))
#if NSLOT == 2
#define ALL_QUIET (QUIET(0) && QUIET(1))
#elif NSLOT == 3
#define ALL_QUIET (QUIET(0) && QUIET(1) && QUIET(2))
#endif
#if NPROC == 2
#define EXITS_DONE ((!killed[0] || exited[0]) && (!killed[1] || exited[1]))
#elif NPROC == 3
#define EXITS_DONE ((!killed[0] || exited[0]) && (!killed[1] || exited[1]) && \
                    (!killed[2] || exited[2]))
#endif
#if NPROC == 2
#define ANY_EXITED (exited[0] || exited[1])
#elif NPROC == 3
#define ANY_EXITED (exited[0] || exited[1] || exited[2])
#endif
#define REAPED (ALL_QUIET && EXITS_DONE && mutex == NONE && recount_seq % 2 == 0)

/* ---- the kernel ------------------------------------------------------- */

/* What the kernel does once process `me` is killed: the robust mutex's
 * owner-died mark (its next taker gets EOWNERDEAD), the OFD liveness lock
 * dropped with the last descriptor, the device memory freed by the driver. */
inline exit_process(me) {
  atomic {
    exited[me] = true;
    if
    :: mutex == me -> mutex = NONE
    :: else
    fi;
    k = 0;
    do
    :: k < NSLOT -> if :: lockholder[k] == me -> lockholder[k] = NONE :: else fi; k++
    :: else -> break
    od;
    k = 0;
    if :: me < NPROC -> phys = phys - owns[me]; owns[me] = 0 :: else fi
  }
}

/* ---- the reaper (reaper.cpp) ------------------------------------------ */

/* recount_while_odd: C2-C5. `own` is the caller's slot (NONE: none). */
inline recount_while_odd(own, counted) {
  /* C2: judge each taken slot by its liveness lock */
  i = 0;
  do
  :: i < NSLOT ->
     live[i] = (slotpid[i] != 0 && (i == own || lockholder[i] != NONE));
     i++
  :: else -> i = 0; break
  od;
  /* C3: wait until every live slot is out of flight */
  counted = true;
  do
  :: i < NSLOT ->
     if
     :: !live[i] || inflight[i] == 0 -> i++
     :: live[i] && inflight[i] != 0 && i != own && lockholder[i] == NONE ->
        live[i] = false; i++           /* died in flight */
     :: live[i] && inflight[i] != 0 ->
        counted = false; break         /* still in flight past kInFlightBound */
     fi
  :: else -> break
  od;
  i = 0;
  if
  :: counted ->
     /* C4: used = sum of the live slots' held */
     atomic {
       sum = 0;
       do
       :: i < NSLOT ->
#ifdef BROKEN_COUNT_DEAD
          if :: slotpid[i] != 0 -> sum = sum + held[i] :: else fi;
#else
          if :: live[i] -> sum = sum + held[i] :: else fi;
#endif
          i++
       :: else -> break
       od;
       used = sum;
       i = 0; sum = 0
     }
     /* C5: clear the dead slots, one by one */
     do
     :: i < NSLOT ->
        atomic {
          if
          :: !live[i] && slotpid[i] != 0 -> held[i] = 0; inflight[i] = 0; slotpid[i] = 0
          :: else
          fi;
          i++
        }
     :: else -> break
     od
  :: else
  fi;
  atomic { i = 0; live[0] = false; live[1] = false;
#if NSLOT == 3
           live[2] = false;
#endif
  }
}

/* end_recount: C6 */
inline end_recount() {
  recount_seq++
}

/* recount: C1, C2-C5, C6 */
inline recount(own, counted) {
  recount_seq++;
  recount_while_odd(own, counted);
  end_recount()
}

/* ReaperLock(kWait): pthread_mutex_lock (EOWNERDEAD made consistent), then
 * an odd sequence's recount finished. */
inline reaper_lock_wait(me, own) {
  atomic { mutex == NONE -> mutex = me };
  if
  :: recount_seq % 2 == 1 -> recount_while_odd(own, counted); end_recount()
  :: else
  fi
}

/* ReaperLock(kTry): got is false when the mutex is busy. */
inline reaper_lock_try(me, own, got) {
  atomic {
    if
    :: mutex == NONE -> mutex = me; got = true
    :: else -> got = false
    fi
  };
  if
  :: got && recount_seq % 2 == 1 -> recount_while_odd(own, counted); end_recount()
  :: else
  fi
}

inline reaper_unlock(me) {
  mutex = NONE
}

/* has_dead_slot, under the mutex */
inline has_dead_slot(own, found) {
  atomic {
    found = false;
    i = 0;
    do
    :: i < NSLOT ->
       if :: slotpid[i] != 0 && i != own && lockholder[i] == NONE -> found = true :: else fi;
       i++
    :: else -> break
    od;
    i = 0
  }
}

/* wait_for_recount: futex_wait on the odd sequence with a 10 ms slice; after
 * each slice, a trylock that finishes a dead reaper's recount. */
inline wait_for_recount(me, own, odd) {
  do
  :: recount_seq != odd -> break
#ifndef BROKEN_NO_TAKEOVER
  :: recount_seq == odd ->            /* the slice ran out */
     reaper_lock_try(me, own, got);
     if
     :: got -> reaper_unlock(me); break
     :: else
     fi
#endif
  od;
  got = false
}

/* ---- the hot path (tenant_ledger.cpp) --------------------------------- */

/* enter_hot_path: R1-R2 (attached_ is true throughout: one thread a process) */
inline enter_hot_path(me, s) {
  do
  :: inflight[s]++;                                   /* R1 */
#ifdef BROKEN_NO_SEQ_CHECK
     break
#else
     seq = recount_seq;                               /* R2 */
     if
     :: seq % 2 == 0 -> break
     :: else -> inflight[s]--; wait_for_recount(me, s, seq)
     fi
#endif
  od;
  seq = 0
}

/* reserve(dev, 1): R1-R5, once more after a reap when there was no room */
inline reserve(me, s) {
  busy[me] = true;
  attempt = 1;
  do
  :: enter_hot_path(me, s);
     held[s]++;                                       /* R3 */
#ifdef BROKEN_NO_CAS
     u = used;                                        /* R4, broken: load ... */
     if
     :: u + 1 <= CAP -> atomic { used = u + 1; owns[me]++; phys++; taken = true }   /* ... store */
     :: else -> taken = false
     fi;
     u = 0;
#else
     atomic {                                         /* R4: take_under_cap's CAS */
       if
       :: used + 1 <= CAP -> used++; owns[me]++; phys++; taken = true
       :: else -> taken = false
       fi
     };
#endif
     if :: !taken -> held[s]-- :: else fi;
     inflight[s]--;                                   /* R5 */
     if
     :: taken -> break
     :: !taken && attempt == 2 -> break               /* oom_denials++ */
     :: !taken && attempt == 1 ->
        /* reap_if_dead_slots */
        reaper_lock_wait(me, s);
        has_dead_slot(s, found);
        if :: found -> recount(s, counted) :: else fi;
        reaper_unlock(me);
        found = false;
        attempt = 2
     fi
  od;
  atomic { attempt = 0; taken = false; counted = false; busy[me] = false }
}

/* release(dev, 1) */
inline release(me, s) {
  busy[me] = true;
  enter_hot_path(me, s);
  held[s]--;
  atomic { used--; owns[me]--; phys-- };
  inflight[s]--;
  busy[me] = false
}

/* take_slot, at attach: the mutex, a recount if a slot is dead, the first
 * free slot whose liveness lock can be taken */
inline take_slot(me, s) {
  reaper_lock_wait(me, NONE);
  has_dead_slot(NONE, found);
  if :: found -> recount(NONE, counted) :: else fi;
  found = false;
  i = 0;
  do
  :: i < NSLOT ->
     if
     :: slotpid[i] == 0 && lockholder[i] == NONE ->
        atomic { lockholder[i] = me; held[i] = 0; slotpid[i] = me + 1; s = i; i = 0 };
        break
     :: else -> i++
     fi
  :: else -> i = 0; break                             /* every slot taken: s stays NONE */
  od;
  reaper_unlock(me)
}

/* detach: the mutex, our held given back, the slot freed, the lock dropped */
inline detach(me, s) {
  reaper_lock_wait(me, s);
  atomic { h = held[s]; held[s] = 0 };
  atomic { used = used - h; owns[me] = owns[me] - h; phys = phys - h; h = 0 };
  slotpid[s] = 0;
  lockholder[s] = NONE;
  reaper_unlock(me)
}

proctype Process(byte me) {
  byte s = NONE, i, k, sum, seq, u, h, attempt, ops;
  bool live[NSLOT], counted, found, got, taken;
  {
    take_slot(me, s);
    if
    :: s == NONE -> goto idle
    :: else
    fi;
    do
    :: ops < OPS -> reserve(me, s); ops++
    :: ops < OPS && owns[me] > 0 -> release(me, s); ops++
    :: ops == OPS -> break
    od;
    if
    :: detach(me, s)
    :: skip                                           /* stays attached, holding */
    fi;
idle:
end_idle:
    (false)
  } unless { killed[me] };
  exit_process(me)
}

/* The server's reaper child (limiter-server/source/loop/ledger_reaper.cpp,
 * shm/source/ledger_inspection.cpp reap_open_ledger): once a tenant process
 * has exited, a trylock, then a recount if a slot is dead. Busy: tried
 * again later. */
proctype ServerReaper() {
  byte i, k, sum;
  bool live[NSLOT], counted, found, got;
  {
end_start:
    do
    :: atomic { ANY_EXITED -> skip };
       reaper_lock_try(SERVER, NONE, got);
       if
       :: got ->
          has_dead_slot(NONE, found);
          if :: found -> recount(NONE, counted) :: else fi;
          reaper_unlock(SERVER);
          break
       :: else                                        /* kBusy: the server tries again */
       fi
    od;
end_done:
    (false)
  } unless { killed[SERVER] };
  exit_process(SERVER)
}

/* SIGKILL, at any step of anyone, at most MAXKILLS times */
#ifndef MAXKILLS
#define MAXKILLS 2
#endif
active proctype Killer() {
  byte kills, p;
end:
  do
  :: kills < MAXKILLS ->
     if
     :: p = 0
     :: p = 1
#if NPROC == 3
     :: p = 2
#endif
     :: p = SERVER
     fi;
     if
     :: !killed[p] -> killed[p] = true; kills++
     :: else
     fi;
     p = 0
  :: kills == MAXKILLS -> break
  od
}

active proctype cap_monitor() {
end:
  atomic { !(used <= CAP && phys <= CAP) -> assert(used <= CAP && phys <= CAP) }
}

active proctype exact_monitor() {
end:
  atomic { REAPED && used != phys -> assert(used == phys) }
}

init {
  atomic {
    lockholder[0] = NONE;
    lockholder[1] = NONE;
#if NSLOT == 3
    lockholder[2] = NONE;
#endif
    run Process(0);
    run Process(1);
#if NPROC == 3
    run Process(2);
#endif
    run ServerReaper()
  }
}

#if NPROC == 2
#define ENDS(p) (!busy[p] || killed[p])
ltl no_wait_forever { [] ((busy[0] -> <> ENDS(0)) && (busy[1] -> <> ENDS(1))) }
#elif NPROC == 3
#define ENDS(p) (!busy[p] || killed[p])
ltl no_wait_forever { [] ((busy[0] -> <> ENDS(0)) && (busy[1] -> <> ENDS(1)) &&
                          (busy[2] -> <> ENDS(2))) }
#endif
