//! Pruning a record's chain (the garbage collector's side of the record) and freeing it.

use super::*;

impl Record {
    /// Drops every version no reader can see, given `snap`. Versions below the newest one
    /// older than `snap.low` are freed at once (no walk reaches them); versions unlinked from
    /// the middle of the chain are pushed onto `unlinked`, to be freed after the walks in
    /// progress finish. A record left holding only a tombstone below `snap.low` dies
    /// (`Pruned::removed`): every reader, now and later, sees that tombstone, which says
    /// what no record says. A newest version on the heap moves into the inline slot if that
    /// is free now ([`Record::move_head_inline`]); the original goes onto `moved`. Returns
    /// `Busy` if the record was held (try again later). `this` is the record's pointer.
    pub(crate) fn prune(
        &self,
        this: RecordPtr,
        snap: &GcSnapshot,
        unlinked: &mut Vec<NonNull<Version>>,
        moved: &mut Vec<MovedOriginal>,
    ) -> Prune {
        debug_assert!(std::ptr::eq(this.get(), self));
        match self.owner.compare_exchange(
            OWNER_NONE,
            OWNER_GC,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {}
            Err(OWNER_DEAD) => return Prune::Dead,
            Err(_) => return Prune::Busy,
        }
        let mut pruned = Pruned::default();
        // SAFETY: holding OWNER_GC excludes committers and other pruners, so the chain is
        // stable and every version on it is live.
        let Some(mut kept) = (unsafe { self.head.load(Ordering::Acquire).as_ref() }) else {
            self.owner.store(OWNER_NONE, Ordering::Release);
            return Prune::Pruned(pruned);
        };
        let head = kept;
        // `kept` is the newest version kept so far (the head always is); `relink` is set
        // once versions after it were dropped, so its `next` must skip them.
        let mut relink = false;
        let mut cur = kept.next.load(Ordering::Acquire);
        // SAFETY: as above.
        while let Some(v) = unsafe { cur.as_ref() } {
            let next = v.next.load(Ordering::Acquire);
            let needed = snap.visible_to_someone(v.ts(), kept.ts());
            if v.ts() < snap.low {
                // The newest version below `low`: every reader stops here or earlier, so
                // nothing walks below it and that tail can go now. It goes too if no reader
                // sees it (then no reader stops on it either).
                let tail = if needed {
                    if relink {
                        kept.next.store(cur, Ordering::Release);
                    }
                    pruned.history_kept = true;
                    v.next.swap(ptr::null_mut(), Ordering::AcqRel)
                } else {
                    kept.next.store(ptr::null_mut(), Ordering::Release);
                    cur
                };
                relink = false;
                let mut dead = tail;
                while let Some(d) = NonNull::new(dead) {
                    // SAFETY: below the cut, unreachable by any walk (see above); freed once.
                    unsafe {
                        dead = d.as_ref().next.load(Ordering::Relaxed);
                        pruned.bytes_freed += d.as_ref().footprint();
                        Version::free(d);
                    }
                }
                break;
            }
            if needed {
                if relink {
                    kept.next.store(cur, Ordering::Release);
                    relink = false;
                }
                pruned.history_kept = true;
                kept = v;
            } else {
                // Unlinked but not touched: a walk standing on it still finds its way on.
                // SAFETY: `cur` is a live chain node, now owned by the caller's limbo.
                unlinked.push(unsafe { NonNull::new_unchecked(cur) });
                relink = true;
            }
            cur = next;
        }
        if relink {
            kept.next.store(ptr::null_mut(), Ordering::Release);
        }
        if head.tombstone {
            if head.ts < snap.low && head.next.load(Ordering::Relaxed).is_null() {
                pruned.removed = self.die();
                if pruned.removed.is_some() {
                    // Stays `OWNER_DEAD`.
                    return Prune::Pruned(pruned);
                }
            }
            // Not yet (or two-phase locked): keep it queued for a later collection.
            pruned.history_kept = true;
        }
        moved.extend(self.move_head_inline(this));
        self.owner.store(OWNER_NONE, Ordering::Release);
        Prune::Pruned(pruned)
    }

    /// With [`OWNER_GC`] held: if the newest version is on the heap while the inline slot is
    /// free and large enough (an update found the slot taken by the version it superseded,
    /// which the GC has freed since), copies it into the slot and publishes the copy as the
    /// head, so the record holds one block again and reads of it skip the second miss.
    /// Returns the heap original: transactions active now may hold slices of it or be
    /// walking through it (its `next` is left intact), so the caller frees it once they
    /// have all ended, as it does removed records.
    fn move_head_inline(&self, this: RecordPtr) -> Option<MovedOriginal> {
        let head = NonNull::new(self.head.load(Ordering::Relaxed))?;
        // SAFETY: the head is live while it is the head, and holding OWNER_GC keeps it so.
        let old = unsafe { head.as_ref() };
        if old.inline
            || old.tombstone
            || VERSION_HEADER + old.len as usize > self.inline_cap as usize
            // Acquire, as in `Version::new_in`: the slot's previous occupant is gone.
            || self.inline_free.swap(0, Ordering::Acquire) != 1
        {
            return None;
        }
        let copy = Record::inline_slot(this.as_non_null());
        // SAFETY: the slot has room (checked) and taking `inline_free` made it ours.
        unsafe {
            Version::write(copy, old.ts, old.value(), true);
            copy.as_ref()
                .next
                .store(old.next.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        // Release: a reader that finds the copy finds it written.
        self.head.store(copy.as_ptr(), Ordering::Release);
        Some(MovedOriginal {
            version: head,
            ts: old.ts,
        })
    }

    /// Frees the whole chain. Only for dropping the `Db`, when nothing else runs.
    ///
    /// # Safety
    /// No reader or writer can reach this record any more.
    pub(crate) unsafe fn free_versions(&self) {
        let mut v = self.head.swap(ptr::null_mut(), Ordering::AcqRel);
        while let Some(dead) = NonNull::new(v) {
            // SAFETY: the caller guarantees exclusivity; each chain node is freed once.
            unsafe {
                v = dead.as_ref().next.load(Ordering::Relaxed);
                Version::free(dead);
            }
        }
    }
}
