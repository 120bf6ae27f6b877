package shop;

import java.util.ArrayList;
import java.util.List;

public class Inventory {
    private final List<Item> items = new ArrayList<>();

    public Inventory() {
        super();
    }

    @Override
    public String toString() {
        return "Inventory(" + items.size() + ")";
    }

    public int restock(String sku,
                       int quantity) {
        if (quantity < 0) {
            throw new IllegalArgumentException("negative");
        }
        items.forEach(item -> {
            if (item.sku().equals(sku)) {
                item.add(quantity);
            }
        });
        return quantity;
    }

    record Item(String sku, int count) {
        Item {
            if (count < 0) {
                throw new IllegalArgumentException("count");
            }
        }
    }

    enum Kind { FOOD, TOOL }
}
