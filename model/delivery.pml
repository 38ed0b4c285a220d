/*
 * delivery.pml: a Promela model of the secret delivery protocol
 * (agreement/delivery, agreement/delivery/pgstate, agentapi, secretstore).
 * See model/README.md for what each part models and how to run it.
 *
 * One agreement, bound to one store name X, delivered to one agent by NB
 * agbots that share a PostgreSQL state. A second store name Y exists only
 * to be "another name that reads fine" in a watcher cycle. Every step of an
 * agbot is named after the Go function it models, with a comment pointing
 * at the code.
 *
 * Abstractions (each argued in README.md):
 *  - time is abstract: a lease, a claim or a backoff "runs out" in a step
 *    of the clock process; a reply timeout fires early (spuriously) only
 *    within the NET_BUDGET, otherwise only when the message or its reply
 *    was lost (ReplyTimeout is longer than a round trip);
 *  - the revision compare-and-set of pgstate is one bit per agbot: "my
 *    copy is still the stored record" (every claim, mark or write clears
 *    every other agbot's bit);
 *  - Epoch<<32|Counter is one counter stored in the record: nextSequence
 *    only ever moves it up (a fresh epoch is larger than every earlier
 *    one), and it is allocated inside the fenced write;
 *  - the agent's reply sequence check (Record.ReplySequence) is subsumed
 *    by InReplyTo, which names a unique envelope sequence;
 *  - one candidate per binding (no fallback to an organisation secret);
 *  - the agent's identity is one record (agreement/identity CertStore) that
 *    Agents.Keys needs before anything is sealed: a restart or a lost
 *    record makes Keys refuse, a registration makes it pass (README.md:
 *    identity).
 */

/* ---- configuration ---------------------------------------------------- */
#ifndef NB
#define NB 2            /* agbots */
#endif
#ifndef MAXV
#define MAXV 3          /* highest store version of X */
#endif
#ifndef STORE_BUDGET
#define STORE_BUDGET 3  /* rotations, deletions, reappearances of X */
#endif
#ifndef FAULT_BUDGET
#define FAULT_BUDGET 2  /* store outage / credential failure / read-deny spell, lease lapses, claim expiries */
#endif
#ifndef NET_BUDGET
#define NET_BUDGET 2    /* lost / duplicated messages, spurious reply timeouts */
#endif
#ifndef GRACE
#define GRACE 2         /* healthy cycles that must confirm an absence before it cancels */
#endif
#ifndef ID_BUDGET
#define ID_BUDGET 0     /* identity faults: agbot restarts, the identity record lost */
#endif
#define NSLOT 3         /* messages the network holds at once (any order) */
#ifndef MAXSEQ
#define MAXSEQ 250
#endif

/* store modes: the agbot's view of the whole store */
#define M_OK       0
#define M_OUTAGE   1    /* every call unavailable */
#define M_CREDFAIL 2    /* credential check fails, every name forbidden */
#define M_READDENY 3    /* credential check passes, every read denied (AWS AccessDenied spell) */

/* observation states (state.ObservedState) */
#define O_UNKNOWN   0
#define O_PRESENT   1
#define O_MISSING   2
#define O_FORBIDDEN 3

/* record phases; R_GONE: removed from the state */
#define R_ACTIVE     1
#define R_CANCELLING 2
#define R_GONE       0

/* next attempt: zero (in sync), later (a lease, reply timeout or backoff), due */
#define N_NEVER 0
#define N_LATER 1
#define N_DUE   2

/* message kinds */
#define K_PROP   1
#define K_UPD    2
#define K_CANCEL 3

/* slot kinds */
#define S_FREE  0
#define S_MSG   1
#define S_REPLY 2

/* results of a read in prepare */
#define RD_NONE   0
#define RD_ABSENT 100   /* every candidate missing or forbidden: wait */
#define RD_UNAV   101   /* the store did not answer: wait */
#define RD_INSYNC 102   /* the observation equals what the agent holds: no value needed */
#define RD_NOKEYS 103   /* Agents.Keys refused the agent (no record for it): wait */
/* 1..MAXV: the version read */

/* ---- the store (secretstore; memory/vault/awssm drivers) -------------- */
byte xv = 1;            /* X's current version */
bool xex = 1;           /* X exists */
byte mode = M_OK;
byte sb = STORE_BUDGET, fb = FAULT_BUDGET, nbud = NET_BUDGET;

/* ---- the shared state (pgstate) --------------------------------------- */
bool live[NB];          /* members row: membership not expired (member_live) */
bool ent[NB];           /* the agbot's own lease: member.until not passed (member.go: entitled) */
byte owner;             /* claim: lease_owner, agbot index + 1, 0 for none */
bool cvalid;            /* claim: lease_until not passed and incarnation current */
bool cas[NB];           /* agbot i's copy of the record is the stored revision */

byte phase = R_ACTIVE;
bool proposed;
byte acked;             /* Slots[0].Acked: version the agent acknowledged */
byte seq;               /* Record.Epoch<<32|Counter, last allocated */
byte infSeq;            /* InFlight.Sequence, 0: nothing in flight */
byte infKind;
byte infVer;
bool infOverdue;        /* its ReplyTimeout passed */
byte next = N_DUE;      /* NextAttempt */

byte obsSt;             /* observations row of X */
byte obsTag;
byte obsGrace;          /* healthy cycles since the absence began (Since), capped at GRACE */
bool obsGenuine = 1;    /* ghost: every cycle that recorded this absence saw X really gone, store healthy */

/* ---- the hub's identity record of the agent (agreement/identity) ------- */
/* The record the identity Verifier reads before an agbot seals (Agents.Keys:
 * the certificate verifies only while its instance has an active record). */
#ifndef BROKEN_IDENTITY_IN_MEMORY
/* pgstate's CertStore: one record in the shared state, read by every agbot,
 * kept across their restarts */
bool idrec = 1;
#define hasRecord(j) idrec
#else
/* the old wiring (examples/agbot openState -> identity.NewMemoryCertStore
 * with a postgres:// state): each agbot's records in its own memory, gone
 * with a restart; a registration reaches one agbot's issuer only */
bool idrec[NB] = 1;
#define hasRecord(j) idrec[j]
#endif
bool refused[NB];       /* agbot j refused the agent's certificate as a lost identity (the agent hears of it) */
byte ib = ID_BUDGET;

/* ---- the agent (agentapi: Receiver, Store floor) ---------------------- */
byte floor;             /* agreementState.Sequence, persisted */
byte held;              /* version of the content the agent holds, 0 for none */
bool ended;             /* agreementState.Ended: a cancellation was applied */

/* ---- the network: NSLOT messages, delivered in any order -------------- */
byte nk[NSLOT];         /* S_FREE, S_MSG, S_REPLY */
byte nfrom[NSLOT];      /* sending agbot (a reply goes back to it: synchronous transport) */
byte nseq[NSLOT];       /* envelope sequence; for a reply, InReplyTo */
byte nkind[NSLOT];
byte nver[NSLOT];

/* ---- ghosts for the properties ---------------------------------------- */
byte pseq[NB];          /* the sequence of the envelope agbot i stored and is about to send */
bool decided;           /* a cancellation was decided (the record went to cancelling) */
bool reappeared;        /* X was deleted and came back (an ended agreement stays ended) */

/* ---- helpers ---------------------------------------------------------- */
/* the claim of agbot o (1-based) is valid: claim_valid */
#define claimValid(o)  ((o) != 0 && cvalid && live[(o)-1])
/* another member than i holds a valid claim */
#define otherClaim(i)  (owner != 0 && owner != (i)+1 && claimValid(owner))

/* every claim, mark or write changes the revision */
#if NB == 1
#define touch() cas[0] = 0
#elif NB == 2
#define touch() cas[0] = 0; cas[1] = 0
#else
#define touch() cas[0] = 0; cas[1] = 0; cas[2] = 0
#endif

/* pgstate MarkDue (not fenced): agreement/delivery/state/backend.go: MarkDue */
inline markDue() {
	if
	:: phase != R_GONE -> next = N_DUE; touch()
	:: else -> skip
	fi
}

/* name_owner: rendezvous hashing over the live members, abstracted as the
 * lowest live index for X and the highest for Y (with two live members
 * they differ, with one they are the same). pgstate/names.go */
inline ownerOfX(r, t) {
	r = 255;
	for (t : 0 .. NB-1) { if :: live[t] && r == 255 -> r = t :: else -> skip fi }
}
inline ownerOfY(r, t) {
	r = 255;
	for (t : 0 .. NB-1) { if :: live[t] -> r = t :: else -> skip fi }
}

/* the network has room: a send waits for it (Transport.Send blocks) */
#define freeSlot (nk[0] == S_FREE || nk[1] == S_FREE || nk[2] == S_FREE)

/* put a message in the network (room checked by the caller) */
inline netPut(kind, from, s, mk, v, t) {
	t = 0;
	do
	:: t < NSLOT && nk[t] != S_FREE -> t++
	:: t < NSLOT && nk[t] == S_FREE -> nk[t] = kind; nfrom[t] = from; nseq[t] = s; nkind[t] = mk; nver[t] = v; break
	:: t == NSLOT -> break
	od
}

/* a message or reply for sequence s is still on the wire */
inline onWire(s, r, t) {
	r = 0;
	for (t : 0 .. NSLOT-1) { if :: nk[t] != S_FREE && nseq[t] == s -> r = 1 :: else -> skip fi };
	for (t : 0 .. NB-1) { if :: pseq[t] == s -> r = 1 :: else -> skip fi }
}

/* batch.go: batch.read through storereader.Reader: a cached value is
 * used unless its tag is not the observed one (then read again); a value
 * that differs from the observation becomes the fresh observation, stored
 * by storeBatch's PutObservations for the member's own share only
 * (pgstate: ConflictError for another member's name). */
inline readX(r, cache, ox, t) {
	if
	:: cache != 0 && obsSt == O_PRESENT && cache != obsTag -> cache = 0
	:: else -> skip
	fi;
	if
	:: cache != 0 -> r = cache
	:: else ->
		if
		:: mode == M_OK && xex -> r = xv; cache = xv
		:: mode == M_OK && !xex -> r = RD_ABSENT
		:: mode == M_OUTAGE -> r = RD_UNAV
		:: mode == M_CREDFAIL || mode == M_READDENY -> r = RD_ABSENT
		fi;
		if
		:: r >= 1 && r <= MAXV && !(obsSt == O_PRESENT && obsTag == r) ->
			ownerOfX(ox, t);
			if
			:: live[i] && ox == i -> obsSt = O_PRESENT; obsTag = r; obsGrace = 0; obsGenuine = 1
#ifndef GO_CACHE_HOLE
			/* fix (batch.go: batch.read): a member that does not poll the name
			 * cannot store what it found, so it does not send it either: it waits
			 * for the member that polls it (errBehindObservation). Otherwise a
			 * member whose cached value equals the stale observation sends the
			 * older content after it. */
			:: else -> r = RD_UNAV
#else
			:: else -> skip   /* ConflictError: the content is sent all the same */
#endif
			fi
		:: else -> skip
		fi
	fi
}

/* reply.go: commit -> applyReply (edit: a fenced Update, retried on
 * conflict; it fails while another member holds a valid claim): a reply is
 * applied only if it names the message in flight (InReplyTo) */
#define replyFor(i) ((nk[0] == S_REPLY && nfrom[0] == (i)) || (nk[1] == S_REPLY && nfrom[1] == (i)) || (nk[2] == S_REPLY && nfrom[2] == (i)))
inline commitReplies() {
	for (k : 0 .. NSLOT-1) {
		if
		:: nk[k] == S_REPLY && nfrom[k] == i ->
			if
			:: live[i] && !otherClaim(i) && phase != R_GONE && infSeq != 0 && infSeq == nseq[k] ->
				if
				:: infKind == K_CANCEL -> phase = R_GONE  /* the agent removed the secrets */
				:: else ->
					if :: infKind == K_PROP -> proposed = 1 :: else -> skip fi;
					acked = infVer; infSeq = 0;
					/* settle when in sync as stored (scan finds it otherwise); a
					 * cancelling record is never in sync: due now */
					if :: phase == R_ACTIVE -> next = N_NEVER :: else -> next = N_DUE fi
				fi;
				touch()
			:: else -> skip /* late reply (InReplyTo not in flight), or not stored */
			fi;
			nk[k] = S_FREE
		:: else -> skip
		fi
	};
	k = 0
}

/* ---- an agbot: agreement/delivery Engine with a pgstate State --------- */
proctype agbot(byte i) {
	bool joined;
	byte cache;         /* secretstore.Reader cache of X's value (version), 0: empty */
	byte rd;            /* what prepare read */
	bool healthy, conf, mine;
	bool decide;        /* scan decided to cancel: stored by the cancel step */
	byte ox, oy, fine, xres, got;
	byte pkind, pver;   /* the envelope sealed, to send (its sequence: pseq[i]) */
	byte k;

end_loop:
	do
	:: /* agreement/delivery/member.go: keepMembership; then
		 * agreement/delivery/cycle.go: cycle, scan (one step: see README) */
		atomic {
			/* internal/storereader/reader.go (Reader): a cached value's TTL passes */
			if :: cache = 0 :: skip fi;
			/* the agbot process restarts (identity budget): what it held in
			 * memory is gone, and it joins with a new incarnation below */
			if
			:: ib > 0 && joined ->
				ib--; joined = 0; cache = 0;
#ifdef BROKEN_IDENTITY_IN_MEMORY
				idrec[i] = 0;   /* identity.NewMemoryCertStore starts empty */
#endif
				skip
			:: skip
			fi;
			if
			:: !joined ->
				/* Membership.Join: a new incarnation, which voids the claims of the earlier one */
				live[i] = 1; ent[i] = 1; joined = 1;
				if :: owner == i+1 -> cvalid = 0 :: else -> skip fi
			:: joined && live[i] ->
				/* Heartbeat (every Period/3): renewed while not expired */
				ent[i] = 1
			:: joined && !live[i] ->
				/* Heartbeat fails with ErrLeaseLost: stop delivering, Join again */
				ent[i] = 0; joined = 0
			fi;

		/* agreement/delivery/cycle.go: cycle (entitled, syncNames, Poll, applyCycle, observe) */
			if
			:: ent[i] && live[i] ->
				ownerOfX(ox, k); ownerOfY(oy, k);
				mine = (ox == i);
				fine = 0; xres = RD_NONE;
				/* internal/storewatch/watcher.go: Poll, check, observe, apply: the names this member polls */
				if
				:: mode == M_OK ->
					if :: oy == i -> fine++ :: else -> skip fi;
					if
					:: mine && xex -> xres = O_PRESENT; fine++
					:: mine && !xex -> xres = O_MISSING; fine++
					:: else -> skip
					fi
				:: mode == M_OUTAGE -> skip    /* every name Unavailable, Outage */
				:: mode == M_CREDFAIL || mode == M_READDENY ->
					if :: mine -> xres = O_FORBIDDEN :: else -> skip fi
				fi;
				/* cycle.go: cycleReport.healthy: credentials pass and a name got a definite answer */
#ifdef BROKEN_CANCEL_ON_FORBIDDEN
				healthy = (mode != M_CREDFAIL && mode != M_OUTAGE);
#else
				healthy = (mode != M_CREDFAIL && mode != M_OUTAGE && fine > 0);
#endif
				/* cycle.go: observe (PutObservations is fenced to the member's share: mine) */
				conf = 0;
				if
				:: xres == O_PRESENT ->
					if
					:: !(obsSt == O_PRESENT && obsTag == xv) ->
						obsSt = O_PRESENT; obsTag = xv; obsGrace = 0; obsGenuine = 1;
						cache = 0;      /* reader.Invalidate */
						markDue()
					:: else -> skip
					fi
				:: (xres == O_MISSING || xres == O_FORBIDDEN) && healthy ->
					/* ghost: the absence is real (w: obsGenuine of this cycle) */
					if
					:: obsSt == O_MISSING || obsSt == O_FORBIDDEN ->
						/* the grace period goes on */
						if :: obsGrace < GRACE -> obsGrace++ :: else -> skip fi;
						obsGenuine = obsGenuine && (!xex && mode == M_OK)
					:: else ->
						obsSt = xres; obsGrace = 1; obsGenuine = (!xex && mode == M_OK);
						cache = 0;
						markDue()
					fi;
					conf = 1  /* CheckedAt = now */
				:: else -> skip
				fi
			:: else -> healthy = 0; conf = 0; mine = 0
			fi;

		/* agreement/delivery/cycle.go: scan, evaluate, cancel */
			if
			:: phase == R_ACTIVE ->
				/* evaluate: inSync (an observation that is not present leaves the stored Desired, which is Acked) */
				if
				:: !(proposed && infSeq == 0 && !(obsSt == O_PRESENT && obsTag != acked)) && next == N_NEVER ->
					markDue()  /* stale: behind the store with nothing scheduled */
				:: else -> skip
				fi;
				/* confirmation: this member's cycle now, or another member's recent healthy cycle */
				if
				:: healthy && (obsSt == O_MISSING || obsSt == O_FORBIDDEN) && (conf || !mine) && obsGrace >= GRACE ->
					/* PROPERTY no_cancel_from_store_failure: decided only on a real absence */
					assert(obsGenuine);
					decide = 1   /* the decision, stored below */
				:: else -> skip
				fi
			:: else -> skip
			fi;
			healthy = 0; conf = 0; mine = 0; ox = 0; oy = 0; fine = 0; xres = 0; k = 0
		};

		/* cycle.go: cancel: editIDs -> Update, fenced (member live, nobody else's
		 * valid claim). A conflict is retried (edit, then the next cycles); a claim
		 * lasts a moment beside an interval, so the model waits for it to end. */
		atomic {
			!decide || !otherClaim(i) || !live[i] ->
			if
			:: decide && live[i] && phase == R_ACTIVE ->
				phase = R_CANCELLING; next = N_DUE; decided = 1;
				if :: owner == i+1 -> owner = 0 :: else -> skip fi;
				touch()
			:: else -> skip
			fi;
			decide = 0
		};

		/* agreement/delivery/batch.go: reconcileBatch (entitled) -> Backend.Due:
		 * due, or its claim void, and nobody else's valid claim (FOR UPDATE SKIP LOCKED) */
		atomic {
			if
#ifndef BROKEN_NO_LEASE_CHECK
			:: ent[i] && live[i] && phase != R_GONE && (next == N_DUE || (owner != 0 && !claimValid(owner))) && !otherClaim(i) ->
#else
			:: phase != R_GONE && (next == N_DUE || (owner != 0 && !claimValid(owner))) ->
#endif
				/* PROPERTY one_claim: at most one agbot delivers the agreement under a valid lease */
				assert(!otherClaim(i));
				owner = i+1; cvalid = 1; next = N_LATER;
				touch(); cas[i] = 1; got = 1;
#ifdef BROKEN_STALE_DECISION
				decide = 1;   /* the claim left in the variable the cancel step reads next cycle */
#endif
				skip
			:: else -> got = 0
			fi;

		/* (one step with Due: what matters is the store at the read) */
		if
		:: got ->
			/* prepare.go: prepare -> prepareActive / prepareCancel -> batch.agentKeys
			 * (Agents.Keys: identity Verifier.Verify against the record) */
				rd = RD_NONE;
				if
				:: !hasRecord(i) && !(phase == R_CANCELLING && seq == 0 && infSeq == 0) ->
					/* no record for the instance: nothing can be sealed, the record
					 * waits (batch.wait); the agbot drops the chain that no longer
					 * verifies and the agent hears the refusal (ErrIdentityLost) */
					rd = RD_NOKEYS; refused[i] = 1
				:: else -> skip
				fi;
			/* prepare.go: prepare -> prepareActive -> resolve -> batch.read (secretstore.Reader) */
				if
				:: rd == RD_NOKEYS -> skip
				:: rd != RD_NOKEYS && phase == R_ACTIVE && (obsSt == O_MISSING || obsSt == O_FORBIDDEN) ->
					rd = RD_ABSENT   /* resolve skips candidates observed absent: absentError, wait */
				:: rd != RD_NOKEYS && phase == R_ACTIVE && !(obsSt == O_MISSING || obsSt == O_FORBIDDEN) ->
					if
					:: proposed ->
						/* resolve(value=false): the observation, or a read when not observed */
						if
						:: obsSt == O_PRESENT -> rd = obsTag
						:: else -> readX(rd, cache, ox, k)
						fi;
						if
						:: rd == acked && !(infSeq != 0 && infVer != acked) -> rd = RD_INSYNC
						:: rd >= 1 && rd <= MAXV ->
							readX(rd, cache, ox, k);
							/* a read that finds what the agent holds sends nothing */
							if :: rd == acked && !(infSeq != 0 && infVer != acked) -> rd = RD_INSYNC :: else -> skip fi
						:: else -> skip
						fi
					:: else -> readX(rd, cache, ox, k)   /* a proposal carries the value */
					fi
				:: else -> skip
				fi;
				ox = 0; k = 0
		:: else -> skip
		fi
		};

		if
		:: got ->

			/* prepare.go: prepare, seal, nextSequence; then Backend.Update (fenced, compare-and-set) */
			atomic {
				pseq[i] = 0;
				if
#ifndef BROKEN_NO_LEASE_CHECK
				:: cas[i] && live[i] && !(owner == i+1 && !cvalid) ->
#else
				:: cas[i] ->
#endif
					if
					:: phase == R_CANCELLING && seq == 0 && infSeq == 0 ->
						phase = R_GONE   /* the agent never heard of it: Delete */
					:: phase == R_CANCELLING && !(seq == 0 && infSeq == 0) && rd == RD_NOKEYS ->
						next = N_LATER   /* prepareCancel: no keys, batch.wait */
					:: phase == R_CANCELLING && !(seq == 0 && infSeq == 0) && rd != RD_NOKEYS ->
						if
						:: infSeq != 0 && infKind == K_CANCEL && !infOverdue -> next = N_LATER  /* batch.inFlight */
						:: else -> pkind = K_CANCEL; pver = 0; pseq[i] = 1
						fi
					:: phase == R_ACTIVE && (rd == RD_ABSENT || rd == RD_UNAV || rd == RD_NONE || rd == RD_NOKEYS) ->
						next = N_LATER   /* batch.wait: backoff, never exhausted */
					:: phase == R_ACTIVE && rd == RD_INSYNC ->
						infSeq = 0; next = N_NEVER
					:: phase == R_ACTIVE && rd >= 1 && rd <= MAXV ->
						if :: proposed -> pkind = K_UPD :: else -> pkind = K_PROP fi;
						if
						:: infSeq != 0 && infKind == pkind && infVer == rd && !infOverdue -> next = N_LATER
						:: else -> pver = rd; pseq[i] = 1
						fi
					:: else -> skip
					fi;
					if
					:: pseq[i] ->
						/* seal: nextSequence */
#ifndef BROKEN_EQUAL_SEQ
						seq++;
#else
						if :: seq == 0 -> seq++ :: else -> skip fi;  /* a new message reuses the sequence */
#endif
						assert(seq < MAXSEQ);
						pseq[i] = seq;
						infSeq = seq; infKind = pkind; infVer = pver; infOverdue = 0;
						next = N_LATER
					:: else -> skip
					fi;
					/* storing the record releases the claim */
					if :: owner == i+1 -> owner = 0 :: else -> skip fi;
					touch()
				:: else ->
					if
					:: live[i] && phase != R_GONE -> next = N_DUE; touch()  /* ConflictError: MarkDue, looked at again */
					:: else -> skip  /* ErrLeaseLost: nothing stored, nothing sent */
					fi
				fi;
				rd = 0; ox = 0; k = 0
			}

			/* batch.go: reconcileBatch's send goroutine (entitled, Transport.Send);
			 * while it waits for room in the network, commitLoop goes on */
			do
			:: atomic { pseq[i] == 0 -> break }
#ifndef BROKEN_NO_LEASE_CHECK
			:: atomic { pseq[i] != 0 && ent[i] && freeSlot -> netPut(S_MSG, i, pseq[i], pkind, pver, k); pseq[i] = 0; pkind = 0; pver = 0; k = 0; break }
#else
			:: atomic { pseq[i] != 0 && freeSlot -> netPut(S_MSG, i, pseq[i], pkind, pver, k); pseq[i] = 0; pkind = 0; pver = 0; k = 0; break }
#endif
			:: atomic { pseq[i] != 0 && !ent[i] ->
				/* errNotEntitled -> commit: fenced edit clears InFlight */
				if
				:: live[i] && !otherClaim(i) && infSeq == pseq[i] -> infSeq = 0; next = N_LATER; touch()
				:: else -> skip
				fi;
				pseq[i] = 0; pkind = 0; pver = 0; break }
			:: atomic { pseq[i] != 0 && replyFor(i) -> commitReplies() }
			od
		:: else -> skip
		fi;

		/* reply.go: commit -> applyReply (edit: fenced Update, retried on conflict) */
		atomic { commitReplies() }
#ifdef BROKEN_NO_CONFIRM
		/* the engine forgets a cancellation once sent, without the agent's reply */
		atomic { if :: phase == R_CANCELLING && infSeq != 0 && infKind == K_CANCEL -> phase = R_GONE :: else -> skip fi }
#endif
	od
}

/* ---- the agent: agentapi Receiver.Receive ------------------------------ */
active proctype agent() {
	byte k;
end_agent:
	do
	:: atomic {
		/* the network delivers any message, in any order */
		if
		:: nk[0] == S_MSG -> k = 0
		:: nk[1] == S_MSG -> k = 1
		:: nk[2] == S_MSG -> k = 2
		fi;
		if
#ifndef BROKEN_NO_FLOOR
		:: nseq[k] < floor -> nk[k] = S_FREE   /* agreement.ErrReplay: below the floor, no reply */
#endif
		:: else ->
			if
			:: nkind[k] == K_CANCEL -> held = 0; ended = 1
			:: else ->
				/* PROPERTY never_older: the agent never applies older content than it holds */
				assert(held == 0 || nver[k] >= held);
				/* PROPERTY never_after_deletion: no content once the cancellation was applied */
				assert(!ended);
				held = nver[k]
			fi;
			if :: nseq[k] > floor -> floor = nseq[k] :: else -> skip fi;
#ifdef BROKEN_FORGET_FLOOR
			if :: ended -> floor = 0 :: else -> skip fi;
#endif
			/* the reply (InReplyTo = the sequence), sealed after the floor is saved */
			nk[k] = S_REPLY; nkind[k] = 0; nver[k] = 0
		fi;
		k = 0
	   }
	od
}

/* ---- the agent's identity: identity.Agent.Run with AgentOptions.Attest --- */
/* Told through Agent.Refused that an agbot no longer knows it (no record,
 * revoked or expired: ErrIdentityLost), the agent registers again through
 * that agbot's issuer: a fresh attestation and a fresh nonce each attempt,
 * capped backoff, never exhausted (a failed attempt is a stutter here; the
 * attempt that succeeds writes the record before the certificate is
 * returned: Issuer.register). Its own goroutine: weakly fair. */
#ifndef BROKEN_NO_REREGISTER
#ifndef BROKEN_IDENTITY_IN_MEMORY
/* one record, in the shared state: any agbot's issuer writes it, and the
 * registration answers every refusal reported meanwhile (Register drains
 * Agent.lost) */
#if NB == 1
#define register(j) idrec = 1; refused[0] = 0
#elif NB == 2
#define register(j) idrec = 1; refused[0] = 0; refused[1] = 0
#else
#define register(j) idrec = 1; refused[0] = 0; refused[1] = 0; refused[2] = 0
#endif
#else
#define register(j) idrec[j] = 1; refused[j] = 0
#endif
active proctype registrar() {
end_registrar:
	do
	:: atomic { refused[0] -> register(0) }
#if NB > 1
	:: atomic { refused[1] -> register(1) }
#endif
#if NB > 2
	:: atomic { refused[2] -> register(2) }
#endif
	od
}
#endif

/* store faults end: the store heals (weakly fair: it cannot be put off for ever) */
active proctype healer() {
end_healer:
	do
	:: atomic { mode != M_OK -> mode = M_OK }
	od
}

/* ---- the world: store changes, faults, network faults, the clock ------- */
active proctype world() {
	byte t;
	bool w;
end_world:
	do
	/* the store: X rotates, is deleted, reappears (restored or as a new version) */
	:: atomic { sb > 0 && xex && xv < MAXV -> xv++; sb-- }
	:: atomic { sb > 0 && xex -> xex = 0; sb-- }
	:: atomic { sb > 0 && !xex -> xex = 1; reappeared = 1; sb-- }
	:: atomic { sb > 0 && !xex && xv < MAXV -> xex = 1; xv++; reappeared = 1; sb-- }
	/* the store fails: an outage, the agbot's own credentials rejected, every read denied */
	:: atomic { fb > 0 && mode == M_OK -> mode = M_OUTAGE; fb-- }
	:: atomic { fb > 0 && mode == M_OK -> mode = M_CREDFAIL; fb-- }
	:: atomic { fb > 0 && mode == M_OK -> mode = M_READDENY; fb-- }
	/* an agbot's heartbeat is late: its own lease runs out first (Until is on its clock) ... */
	:: atomic { fb > 0 && ent[0] -> ent[0] = 0; fb-- }
#if NB > 1
	:: atomic { fb > 0 && ent[1] -> ent[1] = 0; fb-- }
#endif
#if NB > 2
	:: atomic { fb > 0 && ent[2] -> ent[2] = 0; fb-- }
#endif
	/* ... then the state's: the membership expires, its claims are void */
	:: atomic { live[0] && !ent[0] -> live[0] = 0 }
#if NB > 1
	:: atomic { live[1] && !ent[1] -> live[1] = 0 }
#endif
#if NB > 2
	:: atomic { live[2] && !ent[2] -> live[2] = 0 }
#endif
	/* a claim's lease_until passes while its holder works */
	:: atomic { fb > 0 && owner != 0 && cvalid -> cvalid = 0; fb-- }
	/* the network loses a message or reply */
	:: atomic { nbud > 0 && nk[0] != S_FREE -> nk[0] = S_FREE; nbud-- }
	:: atomic { nbud > 0 && nk[1] != S_FREE -> nk[1] = S_FREE; nbud-- }
	:: atomic { nbud > 0 && nk[2] != S_FREE -> nk[2] = S_FREE; nbud-- }
	/* the network duplicates a message (the copy may overtake it) */
	:: atomic { nbud > 0 && nk[0] == S_MSG -> netPut(S_MSG, nfrom[0], nseq[0], nkind[0], nver[0], t); nbud--; t = 0 }
	:: atomic { nbud > 0 && nk[1] == S_MSG -> netPut(S_MSG, nfrom[1], nseq[1], nkind[1], nver[1], t); nbud--; t = 0 }
#ifndef BROKEN_IDENTITY_IN_MEMORY
	/* the shared state loses the agent's identity record (restored from an
	 * older backup), or its certificate expires: Keys refuses it everywhere
	 * (an agbot's restart, in agbot(), is the other identity fault) */
	:: atomic { ib > 0 && idrec -> idrec = 0; ib-- }
#endif
	/* the clock: a backoff or Due's lease passes (never exhausted); with a
	 * message in flight, NextAttempt is its reply timeout (below) */
	:: atomic { next == N_LATER && phase != R_GONE && (infSeq == 0 || infOverdue) -> next = N_DUE }
	/* the clock: the reply timeout passes, when the message or its reply is lost, or early (a fault) */
#ifndef BROKEN_GIVE_UP
	:: atomic { infSeq != 0 && !infOverdue ->
		onWire(infSeq, w, t);
		if
		:: !w -> infOverdue = 1; next = N_DUE
		:: w && nbud > 0 -> infOverdue = 1; next = N_DUE; nbud--
		:: else -> skip
		fi; w = 0; t = 0 }
#endif
	/* BROKEN_GIVE_UP: an unanswered message is never tried again (attempts exhausted) */
	od
}

/* the faults stopped: every budget spent or given up, the store healthy */
#define faultsStopped (sb == 0 && fb == 0 && nbud == 0 && mode == M_OK)

/* PROPERTY converge (liveness): once the faults stop, the agreement ends up
 * delivering the store's newest content, or ended with nothing held, which
 * is right only when X is gone (or was gone: deleted, then back) */
#define converged ((phase == R_ACTIVE && xex && held == xv && acked == xv && infSeq == 0) || \
                   (phase == R_GONE && held == 0 && (!xex || reappeared)))
ltl converge { <> [] converged }

/* PROPERTY deletion_confirmed (liveness): a cancellation, once decided,
 * leaves the agent holding nothing. */
ltl deletion { [] (decided -> <> (held == 0 && phase == R_GONE)) }

init {
	byte i;
	atomic {
		for (i : 0 .. NB-1) { run agbot(i) }
	}
}
