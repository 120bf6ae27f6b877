"""Orders: totals, discounts and refunds."""

import decimal

TAX_RATE = decimal.Decimal("0.2")


class OrderError(ValueError):
    pass


@dataclass
class Order:
    items: list
    customer: str
    paid: bool = False

    @property
    def total(self) -> decimal.Decimal:
        amount = sum(item.price * item.quantity for item in self.items)
        return amount * (1 + TAX_RATE)

    def refund(self,
               reason: str,
               partial: decimal.Decimal | None = None) -> decimal.Decimal:
        if not self.paid:
            raise OrderError("nothing to refund")
        if partial is None:
            partial = self.total
        for item in self.items:
            if item.returned:
                continue
            if item.price > partial:
                log(reason, item)
                partial -= item.price
        return partial


def apply_discount(order, percent):
    if percent > 100:
        raise OrderError("discount above 100%")
    return order.total * (100 - percent) / 100


if __name__ == "__main__":
    print(apply_discount(Order([], "x"), 10))
