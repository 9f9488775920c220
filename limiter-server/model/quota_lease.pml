/* Group and user memory totals, as leases (limiter-server/model/README.md):
 * the protocol designed for issue 16's `memory_total`, modelled before it is
 * built. NTEN tenants of one group share one device whose group total is
 * TOTAL units; each tenant has one process that reserves and releases one
 * unit at a time and may be SIGKILLed at any step; gpulimitd hands out
 * leases and takes back what a tenant does not use.
 *
 * Three pieces of state, each written by one side only:
 *   used[t]   the tenant's ledger count (tenant_ledger.h): written by the
 *             tenant's processes, read by the server
 *   lease[t]  the tenant's lease: a page the server writes and the tenant
 *             maps read-only, so no tenant can raise its own
 *   book[t]   the server's own account of what it promised the tenant; the
 *             group total is checked against the sum of these
 *
 * Each Promela statement is one atomic step; memory is sequentially
 * consistent (the tenant's CAS on used and load of lease, and the server's
 * store of lease and load of used, are the two halves of a Dekker pair and
 * must be seq_cst in the code).
 *
 * Properties:
 *   total_monitor  (assert) the memory the group's processes really hold
 *                  (committed, not yet freed by the kernel) <= TOTAL, and
 *                  the server's promises add up to <= TOTAL, always
 *   ltl answered   a tenant that asks for a lease gets an answer, unless
 *                  it dies (weak fairness; the server does not die here)
 *
 * Broken variants, which SPIN must reject:
 *   -DBROKEN_LEASE_BEFORE_CAS  the tenant reads its lease before its CAS on
 *                              used, not after: a shrink slips between
 *   -DBROKEN_NO_REREAD         the server, shrinking a lease, does not read
 *                              used again after storing the new lease
 *   -DBROKEN_FREE_AT_KILL      the server takes a dead tenant's lease back
 *                              when the process is killed, before the
 *                              kernel has freed its memory
 *   -DBROKEN_SILENT_REFUSAL    the server answers only the requests it
 *                              grants (liveness)
 *   -DBROKEN_RAISE_PROMISE     S3 sets the promise to what it reads of
 *                              used, even above the old promise
 *
 * The first counterexample SPIN found here was in the design itself
 * (BROKEN_RAISE_PROMISE): S3 set the promise to what it read of used,
 * which can hold a reservation about to be undone, so the promise could
 * grow past the old one and the promises past the total. S3 never raises
 * a promise now.
 */

#ifndef NTEN
#define NTEN 2          /* tenants of the group, one process each */
#endif
#ifndef TOTAL
#define TOTAL 2         /* the group's memory_total on the device, in units */
#endif
#ifndef CAP
#define CAP 2           /* each tenant's own cap */
#endif
#ifndef OPS
#define OPS 3           /* reserves/releases per process */
#endif
#ifndef MAXKILLS
#define MAXKILLS 1
#endif

byte used[NTEN];        /* TenantLedger DeviceEntry::used */
byte lease[NTEN];       /* the server-written lease page */
byte book[NTEN];        /* the server's promise to the tenant */

bool killed[NTEN];      /* SIGKILL delivered: no more steps */
bool exited[NTEN];      /* the kernel has finished the exit: memory freed */
bool freed[NTEN];       /* the server has taken the lease back */

/* Ghosts, for the properties. */
byte owns[NTEN];        /* device memory the tenant's process holds */
byte phys;              /* the sum of owns over processes not exited */
bool asking[NTEN];      /* waiting for the server's answer */

chan request = [NTEN] of { byte, byte };  /* tenant, the total it needs */
chan answer[NTEN] = [1] of { bool };

#if NTEN == 2
#define BOOKED (book[0] + book[1])
#elif NTEN == 3
#define BOOKED (book[0] + book[1] + book[2])
#endif

/* ---- a tenant's process (the library: ledger reserve + lease) --------- */

inline commit(t) {
  atomic { owns[t]++; phys++ }               /* cuMemAlloc succeeds */
}

/* reserve(1): L1-L7 (README.md) */
inline reserve(t) {
  attempt = 0;
again:
  u = used[t];                               /* L1 */
  if
  :: u + 1 > CAP -> goto done                /* L2: the tenant's own cap */
  :: else
  fi;
#ifdef BROKEN_LEASE_BEFORE_CAS
  l = lease[t];
#endif
  if
  :: atomic { used[t] == u -> used[t] = u + 1 }   /* L3: the CAS */
  :: atomic { used[t] != u -> skip }; goto again
  fi;
#ifndef BROKEN_LEASE_BEFORE_CAS
  l = lease[t];                              /* L4 */
#endif
  if
  :: u + 1 <= l -> commit(t); goto done      /* L5: within the lease */
  :: else
  fi;
  used[t]--;                                 /* L6: undo */
  if
  :: attempt == 1 -> goto done               /* refused already: out of memory */
  :: else
  fi;
  attempt = 1;
  asking[t] = true;                          /* L7: ask for a lease of u + 1 */
  request!t, u + 1;
  answer[t]?granted;
  asking[t] = false;
  if
  :: granted -> goto again
  :: else                                    /* out of memory at the total */
  fi;
done:
  skip
}

inline release(t) {
  atomic { owns[t]--; phys-- };              /* cuMemFree */
  used[t]--                                  /* the ledger's release */
}

inline exit_process(t) {
  atomic {
    exited[t] = true;
    phys = phys - owns[t];
    owns[t] = 0
  }
}

proctype Tenant(byte t) {
  byte u, l, attempt, ops;
  bool granted;
  {
    do
    :: ops < OPS -> reserve(t); ops++
    :: ops < OPS && owns[t] > 0 -> release(t); ops++
    :: ops == OPS -> break
    od;
end_idle:
    (false)
  } unless { killed[t] };
  exit_process(t)
}

/* ---- gpulimitd -------------------------------------------------------- */

/* Takes back from tenant `o` what it does not use: S1-S3. */
inline shrink(o) {
  s = used[o];                               /* S1 */
  if
  :: s < book[o] ->
     lease[o] = s;                           /* S2 */
#ifdef BROKEN_NO_REREAD
     book[o] = s
#else
     s2 = used[o];                           /* S3: a CAS that slipped in counts, */
     if                                      /* but never above the old promise */
#ifdef BROKEN_RAISE_PROMISE
     :: s2 > s -> book[o] = s2
#else
     :: s2 > s && s2 < book[o] -> book[o] = s2
     :: s2 > s && s2 >= book[o] -> skip
#endif
     :: else -> book[o] = s
     fi
#endif
  :: else
  fi;
  s = 0; s2 = 0
}

/* G1-G4: the lease `need` for tenant `t`, if the total allows it */
inline grant(t, need) {
  if
  :: book[t] >= need ->                     /* G1: promised already (S3 counted a CAS) */
     lease[t] = book[t];
     ok = true
  :: else ->
     if
     :: BOOKED - book[t] + need > TOTAL ->  /* G2: no room: take back the unused */
        o = 0;
        do
        :: o < NTEN -> if :: o != t && !freed[o] -> shrink(o) :: else fi; o++
        :: else -> break
        od;
        o = 0
     :: else
     fi;
     if
     :: BOOKED - book[t] + need <= TOTAL -> /* G3 */
        book[t] = need;
        lease[t] = need;
        ok = true
     :: else -> ok = false                  /* G4: out of memory at the total */
     fi
  fi
}

/* The pidfd of a tenant's last process: readable once the kernel has
 * finished the exit (BROKEN_FREE_AT_KILL: at the kill). */
#ifdef BROKEN_FREE_AT_KILL
#define GONE(d) (killed[d] && !freed[d])
#else
#define GONE(d) (exited[d] && !freed[d])
#endif
#if NTEN == 2
#define ANY_GONE (GONE(0) || GONE(1))
#elif NTEN == 3
#define ANY_GONE (GONE(0) || GONE(1) || GONE(2))
#endif

proctype Server() {
  byte t, need, o, s, s2, d;
  bool ok;
end:
  do
  :: request?t, need ->
     if
     :: !freed[t] -> grant(t, need)
     :: else -> ok = false
     fi;
#ifdef BROKEN_SILENT_REFUSAL
     if
     :: ok -> answer[t]!ok
     :: else                                 /* a refusal left unsaid */
     fi;
#else
     answer[t]!ok;
#endif
     t = 0; need = 0; ok = false
  :: atomic {                               /* a gone tenant's lease comes back */
       ANY_GONE ->
       d = 0;
       do
       :: d < NTEN -> if :: GONE(d) -> book[d] = 0; lease[d] = 0; freed[d] = true :: else fi; d++
       :: else -> d = 0; break
       od
     }
  od
}

/* SIGKILL of any tenant process, at any step, at most MAXKILLS times */
active proctype Killer() {
  byte kills, p;
end:
  do
  :: kills < MAXKILLS ->
     if
     :: p = 0
     :: p = 1
#if NTEN == 3
     :: p = 2
#endif
     fi;
     if
     :: !killed[p] -> killed[p] = true; kills++
     :: else
     fi;
     p = 0
  :: kills == MAXKILLS -> break
  od
}

#if NTEN == 2
#define LEASES_BOOKED (lease[0] <= book[0] && lease[1] <= book[1])
#elif NTEN == 3
#define LEASES_BOOKED (lease[0] <= book[0] && lease[1] <= book[1] && lease[2] <= book[2])
#endif
#define WITHIN (phys <= TOTAL && BOOKED <= TOTAL && LEASES_BOOKED)

active proctype total_monitor() {
end:
  atomic { !WITHIN -> assert(WITHIN) }
}

init {
  atomic {
    run Server();
    run Tenant(0);
    run Tenant(1);
#if NTEN == 3
    run Tenant(2);
#endif
  }
}

#define ANSWERED(t) (!asking[t] || killed[t])
#if NTEN == 2
ltl answered { [] ((asking[0] -> <> ANSWERED(0)) && (asking[1] -> <> ANSWERED(1))) }
#elif NTEN == 3
ltl answered { [] ((asking[0] -> <> ANSWERED(0)) && (asking[1] -> <> ANSWERED(1)) &&
                   (asking[2] -> <> ANSWERED(2))) }
#endif
