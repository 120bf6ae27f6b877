import { api } from "./api.js";

export class Cart {
  constructor(user) {
    this.user = user;
    this.items = [];
  }

  add(item, quantity = 1) {
    if (quantity <= 0) {
      throw new Error("quantity must be positive");
    }
    this.items.push({ item, quantity });
  }

  async checkout() {
    const total = this.items.reduce((sum, entry) => {
      const price = entry.item.price;
      return sum + price * entry.quantity;
    }, 0);
    return api.post("/orders", { user: this.user, total });
  }
}

export function emptyCart(user) {
  return new Cart(user);
}

app.get("/cart", async (req, res) => {
  const cart = emptyCart(req.user);
  res.json(cart);
});
