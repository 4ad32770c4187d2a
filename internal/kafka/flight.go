package kafka

// flight lists the messages handed to sarama and not yet returned, oldest
// first: Defer gives each of them its outcome without waiting for sarama.
// Messages link themselves in (prev, next), so keeping the list allocates
// nothing. Used with the publisher's lock held.
type flight struct {
	head, tail *Message
	n          int
}

func (f *flight) push(m *Message) {
	m.prev, m.next = f.tail, nil
	if f.tail != nil {
		f.tail.next = m
	} else {
		f.head = m
	}
	f.tail = m
	f.n++
}

func (f *flight) remove(m *Message) {
	if m.prev != nil {
		m.prev.next = m.next
	} else {
		f.head = m.next
	}
	if m.next != nil {
		m.next.prev = m.prev
	} else {
		f.tail = m.prev
	}
	m.prev, m.next = nil, nil
	f.n--
}
