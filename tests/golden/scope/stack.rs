use std::fmt;

pub struct Stack<T> {
    items: Vec<T>,
    limit: usize,
}

impl<T: fmt::Debug> Stack<T> {
    pub fn new(limit: usize) -> Self {
        Stack { items: Vec::new(), limit }
    }

    #[inline]
    pub fn push(&mut self,
                item: T) -> Result<(), String> {
        if self.items.len() >= self.limit {
            return Err(format!("full: {:?}", item));
        }
        let check = |value: &T| {
            println!("{:?}", value);
            true
        };
        check(&item);
        self.items.push(item);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes() {
        let mut stack = Stack::new(1);
        assert!(stack.push(1).is_ok());
    }
}
