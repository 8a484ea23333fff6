//! Intrusive doubly-linked lists over dense slots: one 16-byte [`Node`] per slot (links plus
//! the slot's size and a spare word for the policy), shared by any number of lists as long as
//! a slot is on at most one list at a time. Keeping a slot's links and size in one cache line
//! is what makes a simulated request cost one or two cache misses rather than five.

/// "No slot".
pub const NIL: u32 = u32::MAX;

/// One list's ends. `head` is the most recently pushed-front slot.
#[derive(Debug, Clone, Copy)]
pub struct List {
    pub head: u32,
    pub tail: u32,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
        }
    }
}

impl List {
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

/// One slot: its links, its stored size (0 = not cached, for the policies that use it) and a
/// word the policy may use as it likes.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
pub struct Node {
    pub prev: u32,
    pub next: u32,
    pub size: u32,
    pub aux: u32,
}

/// The nodes of every slot.
#[derive(Debug, Clone)]
pub struct Links {
    pub nodes: Vec<Node>,
}

impl Links {
    pub fn new(n: usize) -> Links {
        Links {
            nodes: vec![
                Node {
                    prev: NIL,
                    next: NIL,
                    size: 0,
                    aux: 0
                };
                n
            ],
        }
    }

    /// Makes room for slots `0..n` (new slots unlinked, size 0).
    pub fn grow(&mut self, n: usize) {
        if n > self.nodes.len() {
            self.nodes.resize(
                n,
                Node {
                    prev: NIL,
                    next: NIL,
                    size: 0,
                    aux: 0,
                },
            );
        }
    }

    #[inline]
    pub fn prev(&self, x: u32) -> u32 {
        self.nodes[x as usize].prev
    }

    #[inline]
    pub fn next(&self, x: u32) -> u32 {
        self.nodes[x as usize].next
    }

    #[inline]
    pub fn size(&self, x: u32) -> u32 {
        self.nodes[x as usize].size
    }

    #[inline]
    pub fn node(&mut self, x: u32) -> &mut Node {
        &mut self.nodes[x as usize]
    }

    #[inline]
    pub fn push_front(&mut self, l: &mut List, x: u32) {
        let n = &mut self.nodes[x as usize];
        n.prev = NIL;
        n.next = l.head;
        if l.head != NIL {
            self.nodes[l.head as usize].prev = x;
        } else {
            l.tail = x;
        }
        l.head = x;
    }

    #[inline]
    pub fn push_back(&mut self, l: &mut List, x: u32) {
        let n = &mut self.nodes[x as usize];
        n.next = NIL;
        n.prev = l.tail;
        if l.tail != NIL {
            self.nodes[l.tail as usize].next = x;
        } else {
            l.head = x;
        }
        l.tail = x;
    }

    #[inline]
    pub fn remove(&mut self, l: &mut List, x: u32) {
        let node = &mut self.nodes[x as usize];
        let (p, n) = (node.prev, node.next);
        node.prev = NIL;
        node.next = NIL;
        if p != NIL {
            self.nodes[p as usize].next = n;
        } else {
            l.head = n;
        }
        if n != NIL {
            self.nodes[n as usize].prev = p;
        } else {
            l.tail = p;
        }
    }

    /// Moves `x` (on `l`) to the front of `l`.
    #[inline]
    pub fn move_to_front(&mut self, l: &mut List, x: u32) {
        if l.head != x {
            self.remove(l, x);
            self.push_front(l, x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(k: &Links, l: &List) -> Vec<u32> {
        let mut v = Vec::new();
        let mut x = l.head;
        while x != NIL {
            v.push(x);
            x = k.next(x);
        }
        v
    }

    #[test]
    fn push_remove_move() {
        let mut k = Links::new(5);
        let mut l = List::default();
        for x in 0..4 {
            k.push_front(&mut l, x);
        }
        assert_eq!(walk(&k, &l), vec![3, 2, 1, 0]);
        k.remove(&mut l, 2);
        k.move_to_front(&mut l, 0);
        k.push_back(&mut l, 4);
        assert_eq!(walk(&k, &l), vec![0, 3, 1, 4]);
        assert_eq!((l.head, l.tail), (0, 4));
        for x in [0, 3, 1, 4] {
            k.remove(&mut l, x);
        }
        assert!(l.is_empty() && l.tail == NIL);
    }
}
